# shellcheck shell=bash
# shellcheck disable=SC2154  # the variables bench.sh sets before sourcing this
# Sourced by scripts/bench.sh when --flow-rounds R is above 0 (2 by
# default; not with --scale or --soak), not run on its own: bench.sh calls
# `flow_check_environment` before it builds anything, `flow_phase R` after
# its own rounds (before pgbench) and `flow_summary` after its summary. It
# uses bench.sh's variables and functions: start_coordinator,
# stop_coordinators, stop_pid, gen_run, result, log, die, $runtime,
# $base1, $gen, $ctl, $work, $logs, $results, $runs, $concurrency,
# $warmup_runs, and sets otlp_sink_pid (bench.sh's cleanup stops it).
#
# What it measures: the throughput cost of the runtime file's per-connection
# flow control (`limits`, docs/runtime.md "Flow control") and of
# OpenTelemetry traces (`telemetry.traces.endpoint`), each against both
# off, with one coordinator process. Four runtime files, all from
# "$runtime":
#   off     "$runtime" itself;
#   limits  every connection with `limits: {inFlight: 1000, perSecond:
#           10000}`: a limit far above what the benchmark asks (a few
#           calls per run, a few hundred runs/s), so no call waits and what
#           is measured is what keeping the limits costs;
#   traces  `telemetry.traces.endpoint` at `throughput otlp-sink`, an
#           OTLP/HTTP receiver on this machine that counts the spans it
#           gets (its CPU is not the coordinator's, but it is on the same
#           cores, as a local collector would be);
#   both    the two.
# Each round takes the four in turn; for each: coordinator 1 restarted on
# that file, --warmup-runs runs (not counted), then --runs runs at
# --concurrency clients (a `throughput` phase: each run read back finished
# and Messaging's requests one per idempotency key, as everywhere), then
# the process stopped, so its last spans are exported before the sink's
# count is read. Each setup's figure is the mean of its rounds.

# The generous limit of the `limits` and `both` files.
flow_in_flight=1000
flow_per_second=10000
# The issue's target: each setup within this many percent of `off`.
flow_target_pct=15
flow_setups=(off limits traces both)
flow_rounds_run=0
flow_connections=0
flow_sink_counts=""
flow_endpoint=""

# flow_check_environment: `off` and `limits` must export no trace, which
# the standard OTLP variables would turn on (docs/runtime.md `telemetry`).
flow_check_environment() {
  local v
  for v in OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; do
    [ -z "${!v:-}" ] \
      || die "$v is set: the flow phase's setups without traces would export traces; unset it or pass --flow-rounds 0"
  done
}

# flow_limits_file IN OUT: IN with `limits` on every connection. IN is
# sandbox_runtime_file's shape: a top-level `connections:` whose entries
# are `  NAME:` lines with their members indented by four; anything else
# in that block is refused rather than guessed at.
flow_limits_file() {
  local in="$1" out="$2" n
  grep -q '^    limits:' "$in" && die "$in already has limits; the flow phase expects the generated runtime file without them"
  n="$(awk -v out="$out" -v f="$flow_in_flight" -v r="$flow_per_second" '
    /^connections:[[:space:]]*$/ { inside = 1; print > out; next }
    inside && /^[^[:space:]#]/ { inside = 0 }
    inside && /^  [^[:space:]#]/ {
      if ($0 !~ /^  [A-Za-z0-9_-]+:[[:space:]]*$/) { bad = NR; exit }
      print > out
      print "    limits:" > out
      print "      inFlight: " f > out
      print "      perSecond: " r > out
      n++
      next
    }
    { print > out }
    END { if (bad) print "line " bad; else print n + 0 }
  ' "$in")"
  [[ "$n" =~ ^[1-9][0-9]*$ ]] \
    || die "cannot add limits to $in (connections: $n): not the shape scripts/sandbox-deployment.sh writes"
  flow_connections="$n"
}

# flow_traces_file IN OUT ENDPOINT: IN with a `telemetry` section.
flow_traces_file() {
  local in="$1" out="$2" endpoint="$3"
  grep -q '^telemetry:' "$in" && die "$in already has a telemetry section"
  { cat "$in"; printf 'telemetry:\n  traces:\n    endpoint: %s\n' "$endpoint"; } >"$out"
}

# flow_check_file FILE: coordinatorctl's deployment check accepts it.
flow_check_file() {
  "$ctl" --runtime-config "$1" check >"$logs/check-$(basename "$1").txt" 2>&1 \
    || { cat "$logs/check-$(basename "$1").txt" >&2; die "coordinatorctl check refused $1 (above)"; }
}

# flow_spans: the spans the sink has counted so far.
flow_spans() {
  local n
  n="$(sed -n 's/^spans=//p' "$flow_sink_counts")"
  [[ "$n" =~ ^[0-9]+$ ]] || die "no span count in $flow_sink_counts"
  printf '%s' "$n"
}

flow_start_sink() {
  local port
  port="$("$gen" free-ports 1)"
  [[ "$port" =~ ^[0-9]+$ ]] || die "free-ports printed no port"
  flow_sink_counts="$work/otlp-sink.counts"
  "$gen" otlp-sink --port "$port" --count-file "$flow_sink_counts" --watch-pid "$$" \
    >>"$logs/otlp-sink.log" 2>&1 &
  otlp_sink_pid=$!
  wait_for_file "$otlp_sink_pid" "$flow_sink_counts" 10 "the OTLP sink" "$logs/otlp-sink.log"
  flow_endpoint="http://127.0.0.1:$port/v1/traces"
}

# flow_phase ROUNDS
flow_phase() {
  local rounds="$1" round setup spans0 spans1 garbled
  local -A files
  flow_start_sink
  files[off]="$runtime"
  files[limits]="$work/runtime-flow-limits.yaml"
  files[traces]="$work/runtime-flow-traces.yaml"
  files[both]="$work/runtime-flow-both.yaml"
  flow_limits_file "$runtime" "${files[limits]}"
  flow_traces_file "$runtime" "${files[traces]}" "$flow_endpoint"
  flow_traces_file "${files[limits]}" "${files[both]}" "$flow_endpoint"
  for setup in limits traces both; do
    flow_check_file "${files[$setup]}"
  done
  echo "== flow control and tracing: 1 process, $rounds round(s) of off, limits, traces, both in turn"
  echo "  limits: inFlight $flow_in_flight, perSecond $flow_per_second (burst $flow_per_second) on each of the $flow_connections connections, far above what is asked: no call waits"
  echo "  traces: telemetry.traces.endpoint $flow_endpoint (throughput otlp-sink, counting spans; the SDK's batch processor at its defaults)"
  echo "  each: coordinator 1 restarted on its runtime file, $warmup_runs warm-up runs (not counted), $runs runs at $concurrency clients"
  echo
  for round in $(seq 1 "$rounds"); do
    for setup in "${flow_setups[@]}"; do
      stop_coordinators
      start_coordinator 1 "${files[$setup]}" "$base1"
      log "flow round $round of $rounds, $setup: warm-up, $warmup_runs runs (not counted)"
      gen_run throughput "flow-warmup-$setup-$round" "$base1" -- --runs "$warmup_runs" \
        --concurrency "$concurrency" --top 0 >"$logs/flow-warmup-$setup-$round.txt"
      spans0="$(flow_spans)"
      echo "(flow: $setup, round $round)"
      gen_run throughput "flow-$setup-$round" "$base1" -- --runs "$runs" --concurrency "$concurrency"
      # Stopped now, so its last spans are exported before they are counted.
      stop_coordinators
      spans1="$(flow_spans)"
      printf 'flow-%s-%s.spans=%s\n' "$setup" "$round" "$((spans1 - spans0))" >>"$results"
      case "$setup" in
        traces|both)
          [ "$spans1" -gt "$spans0" ] \
            || die "the OTLP sink got no span during flow-$setup-$round: traces were not on (see $logs/coordinator-1.log, $logs/otlp-sink.log)"
          echo "  spans received             $((spans1 - spans0)) by the OTLP sink"
          ;;
        *)
          [ "$spans1" -eq "$spans0" ] \
            || die "the OTLP sink got $((spans1 - spans0)) spans during flow-$setup-$round, a setup without traces"
          ;;
      esac
      echo
    done
  done
  garbled="$(sed -n 's/^garbled=//p' "$flow_sink_counts")"
  [ "${garbled:-0}" -eq 0 ] || die "the OTLP sink could not decode $garbled export requests (see $logs/otlp-sink.log)"
  stop_pid "$otlp_sink_pid"
  otlp_sink_pid=""
  flow_rounds_run="$rounds"
}

# flow_summary: one line per setup; printed after bench.sh's summary.
flow_summary() {
  [ "$flow_rounds_run" -gt 0 ] || return 0
  local setup round keys span_keys all spans off_all off
  echo
  echo "== summary: flow control and tracing (1 process, $runs runs at $concurrency clients, mean of $flow_rounds_run round(s) in turn; target: each within $flow_target_pct% of off)"
  keys=()
  for round in $(seq 1 "$flow_rounds_run"); do keys+=("flow-off-$round.runs_per_s"); done
  off_all="$(means "${keys[@]}")"
  off="${off_all%%|*}"
  for setup in "${flow_setups[@]}"; do
    keys=()
    span_keys=()
    for round in $(seq 1 "$flow_rounds_run"); do
      keys+=("flow-$setup-$round.runs_per_s")
      span_keys+=("flow-$setup-$round.spans")
    done
    all="$(means "${keys[@]}")"
    spans="$(for k in "${span_keys[@]}"; do result "$k"; done | tr '\n' ' ')"
    awk -v setup="$setup" -v mean="${all%%|*}" -v values="${all#*|}" -v off="$off" \
        -v target="$flow_target_pct" -v spans="$spans" -v runs="$runs" \
        -v lim="inFlight $flow_in_flight, perSecond $flow_per_second" 'BEGIN {
      line = sprintf("  %-7s runs/s %7.1f (mean of %s)", setup, mean, values)
      if (setup != "off") {
        pct = (mean - off) / off * 100
        line = line sprintf(", %+.1f%% against off (%s)", pct, (pct >= -target ? "within " target "%" : "NOT within " target "%"))
      }
      if (setup == "limits" || setup == "both") line = line "; limits " lim
      if (setup == "traces" || setup == "both") {
        n = split(spans, s, " "); l = ""
        for (i = 1; i <= n; i++) l = l (i > 1 ? ", " : "") sprintf("%.2f", s[i] / runs)
        line = line "; spans per run " l
      }
      print line
    }'
  done
  echo "  every flow phase: each run finished, Messaging saw one request per idempotency key, none performed twice"
}
