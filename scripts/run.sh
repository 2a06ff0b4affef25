#!/usr/bin/env bash
# The main job on a fresh machine (README "Two commands"), on an embedded
# default:
#
#  1. builds coordinatorctl, coordinator and coordinator-sandbox (one cargo
#     invocation, release), creates the starter project in a scratch
#     directory and runs the author's journey of seed 004 (init, test,
#     explain, check, package);
#  2. serves it: starts (or reuses) a local throw-away PostgreSQL 17
#     (scripts/postgres.sh start) and coordinator-sandbox (local stand-ins for
#     the issuer, BReg and Messaging; a trial aid, not for production),
#     writes the keys and database URL secrets (owner-only), completes the
#     starter's runtime.yaml with a `deployment` section, runs check, plan,
#     apply and deployment-status, starts coordinator, starts one run with
#     curl and follows it with `coordinatorctl status` until it finishes,
#     then prints `inspect` and `doctor`;
#  3. stops coordinator and the sandbox (also on failure or Ctrl-C) and says
#     where the work directory, runtime file and logs are. PostgreSQL keeps
#     running for the next time (scripts/postgres.sh stop ends it).
#
#   scripts/run.sh [DIR]     DIR keeps the results (default: a new scratch
#                            directory); its follow-up*, sandbox, runtime.yaml,
#                            audit and logs entries are replaced.
#
#   scripts/run.sh reviewed-notice [--decide approve|decline] [DIR]
#                            the tutorial "Review an application and send an
#                            approval notice": the same journey and serving
#                            for examples/reviewed-notice (copied into DIR),
#                            with the sandbox's Casework stand-in; the run
#                            waits for the review, which a person approves or
#                            declines with the printed `coordinator-sandbox
#                            decide` command; followed to its end
#                            (scripts/run-reviewed-notice.sh). With --decide
#                            the script decides itself and exits 0 only when
#                            the run ended as decided.
#
# COORDINATOR_RUN_BIN_DIR=D  take coordinatorctl, coordinator and
#                            coordinator-sandbox from D (already built; no
#                            cargo build), e.g. target/debug in the tests.
# COORDINATOR_RUN_PG_PORT=N  use scripts/postgres.sh --port N (default 54317).
# COORDINATOR_RUN_KEEP_SERVING=1  keep coordinator and the sandbox serving
#                            after the run (for the printed `coordinatorctl
#                            console` command) until Ctrl-C; if coordinator
#                            exits meanwhile (killed in a crash trial), the
#                            sandbox keeps serving and the command that
#                            starts coordinator again is printed.
# With COORDINATOR_TEST_DATABASE_URL, _MIGRATION_URL and _RUNTIME_URL set,
# that PostgreSQL 17 is used instead (docs/testing-postgres.md). Each run
# applies a new namespace (coordinator_follow_up_<random>) and database id.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# The project served: the starter (follow-up), or the reviewed-notice
# tutorial with its optional --decide.
project=follow-up
decide=""
if [ "${1:-}" = reviewed-notice ]; then
  project=reviewed-notice
  shift
  if [ "${1:-}" = --decide ]; then
    case "${2:-}" in
      approve | decline) decide="$2" ;;
      *)
        printf 'run.sh: error: --decide takes approve or decline\n' >&2
        exit 2
        ;;
    esac
    shift 2
  fi
fi
if [ $# -gt 1 ] || [[ "${1:-}" == -* ]]; then
  printf 'usage: scripts/run.sh [DIR]\n       scripts/run.sh reviewed-notice [--decide approve|decline] [DIR]\n' >&2
  exit 2
fi
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

die() {
  printf 'run.sh: error: %s\n' "$*" >&2
  exit 1
}
# shellcheck source=scripts/sandbox-deployment.sh
. "$root/scripts/sandbox-deployment.sh"
trap 'printf "run.sh: error: line %s: \"%s\" failed\n" "$LINENO" "$BASH_COMMAND" >&2' ERR
case "$work" in
  *[\"\\\'$'\n']*) die "the work directory '$work' holds a quote, backslash or newline; choose a plainer path" ;;
esac

if [ -n "${COORDINATOR_RUN_BIN_DIR:-}" ]; then
  bin="$(cd "$COORDINATOR_RUN_BIN_DIR" && pwd)" || die "COORDINATOR_RUN_BIN_DIR=$COORDINATOR_RUN_BIN_DIR is not a directory"
else
  cargo build --release --quiet --manifest-path "$root/Cargo.toml" \
    -p registry-coordinator -p coordinator-fakes
  bin="$(cd "${CARGO_TARGET_DIR:-$root/target}" && pwd)/release"
fi
ctl="$bin/coordinatorctl"
coordinator="$bin/coordinator"
sandbox="$bin/coordinator-sandbox"
for b in "$ctl" "$coordinator" "$sandbox"; do
  [ -x "$b" ] || die "$b is missing (build it, or unset COORDINATOR_RUN_BIN_DIR)"
done
cd "$work"
rm -rf follow-up follow-up-package reviewed-notice reviewed-notice-package sandbox runtime.yaml audit logs
mkdir -m 0700 logs
if [ "$project" = follow-up ]; then
  "$ctl" init --directory follow-up
else
  cp -R "$root/examples/reviewed-notice" reviewed-notice
fi
"$ctl" test --project "$project"
"$ctl" explain --project "$project"
"$ctl" check --project "$project" --runtime-config "$project/runtime.yaml"
"$ctl" package --project "$project" --output "$project-package" | tee logs/package.txt

# ------------------------------------------------------------------ serve
logs="$work/logs"
runtime="$work/runtime.yaml"
sandbox_pid=""
coordinator_pid=""

# Stops what this script started: coordinator (SIGTERM, then SIGKILL after
# 20 s), then the sandbox.
stop_all() {
  if [ -n "$coordinator_pid" ] && kill -0 "$coordinator_pid" 2>/dev/null; then
    kill -TERM "$coordinator_pid" 2>/dev/null || true
    for _ in $(seq 1 80); do
      kill -0 "$coordinator_pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -KILL "$coordinator_pid" 2>/dev/null || true
  fi
  [ -z "$coordinator_pid" ] || wait "$coordinator_pid" 2>/dev/null || true
  if [ -n "$sandbox_pid" ] && kill -0 "$sandbox_pid" 2>/dev/null; then
    kill -TERM "$sandbox_pid" 2>/dev/null || true
  fi
  [ -z "$sandbox_pid" ] || wait "$sandbox_pid" 2>/dev/null || true
  coordinator_pid=""
  sandbox_pid=""
}

# On any exit: stop everything; on failure, show the logs' tails.
cleanup() {
  local rc=$?
  trap - ERR
  set +e
  stop_all
  if [ -n "$stop_requested" ]; then
    # Ctrl-C or SIGTERM: a stop that was asked for, not a failure.
    printf '\nrun.sh: stopped; work directory: %s, logs: %s\n' "$work" "$logs" >&2
  elif [ "$rc" -ne 0 ]; then
    for f in "$logs/coordinator.log" "$logs/sandbox.log"; do
      if [ -s "$f" ]; then
        printf '\n--- last 20 lines of %s ---\n' "$f" >&2
        tail -n 20 "$f" >&2
      fi
    done
    printf '\nrun.sh: failed (exit %s); work directory: %s, logs: %s\n' "$rc" "$work" "$logs" >&2
  fi
  exit "$rc"
}
stop_requested=""
trap cleanup EXIT
trap 'stop_requested=1; exit 130' INT
trap 'stop_requested=1; exit 143' TERM

echo
if [ "$project" = follow-up ]; then served="the starter"; else served="$project"; fi
echo "== serving $served: local PostgreSQL 17, sandbox stand-ins, coordinator =="

# 1. PostgreSQL 17 (started, or reused when it already runs).
pg_args=()
if [ -n "${COORDINATOR_RUN_PG_PORT:-}" ]; then pg_args=(--port "$COORDINATOR_RUN_PG_PORT"); fi
pg_env="$("$root/scripts/postgres.sh" start "${pg_args[@]}" 2>"$logs/postgres-start.log")" \
  || die "scripts/postgres.sh start failed; see $logs/postgres-start.log and docs/testing-postgres.md"
eval "$pg_env"
if [ -z "${COORDINATOR_TEST_RUNTIME_URL:-}" ] || [ -z "${COORDINATOR_TEST_MIGRATION_URL:-}" ]; then
  die "scripts/postgres.sh start printed no COORDINATOR_TEST_RUNTIME_URL / _MIGRATION_URL"
fi
role="$(sandbox_database_role)"
echo "postgresql: ${COORDINATOR_TEST_RUNTIME_URL##*@} (runtime role $role)"

# 2. Stand-ins for the issuer and the products.
sandbox_start "$sandbox" "$work/sandbox" "$logs/sandbox.log"
echo "sandbox: issuer $SANDBOX_ISSUER, breg $SANDBOX_BREG_URL, messaging $SANDBOX_MESSAGING_URL, casework $SANDBOX_CASEWORK_URL (pid $sandbox_pid)"

# 3. Keys, database URL secrets, the completed runtime file
# (scripts/sandbox-deployment.sh, shared with scripts/bench.sh).
sandbox_write_secrets "$work/audit"
digest="$(sandbox_package_digest logs/package.txt)"
revision="$(sandbox_package_revision "$project-package")"
suffix="$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
namespace="coordinator_${project//-/_}_$suffix"
sandbox_runtime_file "$project/runtime.yaml" "$runtime" "$namespace" "run-sh-$suffix" \
  "$work/$project-package" "$digest" "$work/audit" "$project"
echo "runtime file: $runtime (namespace $namespace)"

# 4. Check, plan, apply, deployment-status.
for command in check plan apply deployment-status; do
  echo "\$ coordinatorctl --runtime-config runtime.yaml $command"
  rc=0
  "$ctl" --runtime-config "$runtime" "$command" || rc=$?
  [ "$rc" -eq 0 ] || die "coordinatorctl $command refused (exit $rc); see the diagnostics above and $runtime"
done

# 5. Serve, start one run, follow it.
base="http://127.0.0.1:$SANDBOX_LISTENER_PORT"
RUST_LOG="${RUST_LOG:-info,sqlx=warn}" "$coordinator" --runtime-config "$runtime" >"$logs/coordinator.log" 2>&1 &
coordinator_pid=$!
ready=""
for _ in $(seq 1 240); do
  kill -0 "$coordinator_pid" 2>/dev/null || die "coordinator exited before it was ready; see $logs/coordinator.log"
  if ready="$(curl -fsS --max-time 2 "$base/ready" 2>/dev/null)"; then break; fi
  ready=""
  sleep 0.25
done
[ -n "$ready" ] || die "coordinator did not answer /ready within 60 s; see $logs/coordinator.log"
echo "coordinator: $base (pid $coordinator_pid), /ready: $ready"

# 6. Stop, and say where everything is.
finish() {
  echo
  echo "stopping coordinator and the sandbox"
  stop_all
  grep -e '^messaging: ' -e '^casework: ' -e '^coordinator-sandbox: stopping' "$logs/sandbox.log" || true
  echo "work directory: $work"
  echo "runtime file:   $runtime"
  echo "logs:           $logs (coordinator.log, sandbox.log, postgres-start.log, package.txt)"
  echo "PostgreSQL 17 keeps running for the next run; stop it with: $root/scripts/postgres.sh stop${pg_args[*]:+ ${pg_args[*]}}"
}

if [ "$project" = reviewed-notice ]; then
  # shellcheck source=scripts/run-reviewed-notice.sh
  . "$root/scripts/run-reviewed-notice.sh"
  reviewed_notice_tutorial
  exit 0
fi

# The bearer token goes to curl in a header file, never on a command line.
header="$work/sandbox/producer-authorization"
(umask 077 && printf 'Authorization: Bearer %s\n' "$(<"$SANDBOX_PRODUCER_TOKEN_FILE")" >"$header")
send_after="$(date -u -d '+5 seconds' +%Y-%m-%dT%H:%M:%SZ)"
body="{\"workflow\":\"follow-up\",\"revision\":\"$revision\",\"input\":{\"applicationId\":\"$SANDBOX_APPLICATION_ID\",\"sendAfter\":\"$send_after\"}}"
echo "\$ curl -X POST $base/v1/runs (applicationId $SANDBOX_APPLICATION_ID, sendAfter $send_after)"
status="$(curl -sS --max-time 10 -o "$logs/start-response.json" -w '%{http_code}' \
  -X POST "$base/v1/runs" -H @"$header" -H 'Content-Type: application/json' \
  -H "Idempotency-Key: run-sh-$suffix" --data "$body")" \
  || die "POST /v1/runs failed to connect; see $logs/coordinator.log"
cat "$logs/start-response.json"
echo
[ "$status" = 201 ] || [ "$status" = 200 ] || die "POST /v1/runs answered $status (above)"
run="$(sed -n 's/.*"run" *: *"\([^"]*\)".*/\1/p' "$logs/start-response.json")"
[ -n "$run" ] || die "no run id in the answer to POST /v1/runs"

token="$SANDBOX_OPERATOR_TOKEN_FILE"
echo "\$ coordinatorctl status --run $run --url $base --token-file $token   (until finished)"
state=""
last=""
for _ in $(seq 1 90); do
  rc=0
  out="$("$ctl" status --run "$run" --url "$base" --token-file "$token" 2>&1)" || rc=$?
  [ "$rc" -eq 0 ] || die "coordinatorctl status failed (exit $rc): $out"
  state="$(printf '%s\n' "$out" | sed -n 's/^state: //p')"
  if [ "$state" != "$last" ]; then
    echo "  $(date -u +%H:%M:%S) state: $state"
    last="$state"
  fi
  case "$state" in
    finished) break ;;
    running) ;;
    *)
      "$ctl" inspect --run "$run" --url "$base" --token-file "$token" || true
      die "run $run is $state, not finished (inspect above)"
      ;;
  esac
  sleep 1
done
[ "$state" = finished ] || die "run $run is still $state after 90 s"
printf '%s\n' "$out"
echo "\$ coordinatorctl inspect --run $run --url $base --token-file $token"
"$ctl" inspect --run "$run" --url "$base" --token-file "$token" || die "coordinatorctl inspect failed"
echo "\$ coordinatorctl doctor --url $base --token-file $token"
"$ctl" doctor --url "$base" --token-file "$token" || die "coordinatorctl doctor failed"
echo
echo "the operator console for this run (open the URL it prints; Ctrl-C stops it):"
echo "\$ $ctl console --url $base --token-file $token --project $work/follow-up"
echo "  then Runs -> $run"
if [ "${COORDINATOR_RUN_KEEP_SERVING:-}" = 1 ]; then
  echo "COORDINATOR_RUN_KEEP_SERVING=1: coordinator and the sandbox keep serving until Ctrl-C"
  exited=0
  wait "$coordinator_pid" || exited=$?
  coordinator_pid=""
  # A coordinator killed or stopped from outside (a crash or restart
  # trial): the sandbox keeps serving, so it can be started again.
  echo "coordinator exited (status $exited; see $logs/coordinator.log); the sandbox keeps serving until Ctrl-C"
  echo "  start coordinator again with:"
  echo "    RUST_LOG=info,sqlx=warn $coordinator --runtime-config $runtime >>$logs/coordinator.log 2>&1 &"
  echo "  (a coordinator started by hand is not stopped by Ctrl-C here: stop it with kill)"
  wait "$sandbox_pid" || true
else
  echo "  (coordinator stops below; run with COORDINATOR_RUN_KEEP_SERVING=1 to keep it serving for the console)"
fi

finish
