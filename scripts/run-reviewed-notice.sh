# Sourced by scripts/run.sh (not run on its own): the tutorial "Review an
# application and send an approval notice" once examples/reviewed-notice is
# served (`scripts/run.sh reviewed-notice [--decide approve|decline]`).
#
# reviewed_notice_tutorial: starts one run, waits until it waits for the
# review (the sandbox's Casework stand-in holds the review request), then
# either tells the person the one command that decides it (`coordinator-
# sandbox decide SANDBOX_DIR approve|decline`, which decides the request in
# Casework and sends the coordinator the review completion) or, with
# --decide, runs that command itself; follows the run to its end and checks
# it ended as decided: `approval-notice-sent` with one message accepted by
# Messaging after an approval, `application-rejected` with none after a
# decline. Dies (non-zero exit) otherwise.
#
# Needs, from run.sh: die, finish, $ctl, $sandbox, $work, $logs, $base,
# $revision, $suffix, $decide, the sandbox's variables, and
# $coordinator_pid.

# The decision the sandbox's log says was taken for review request $1
# (`approved` or `rejected`), or nothing yet.
reviewed_notice_decision() {
  sed -n "s/^casework: review request $1 decided: \([a-z]*\) .*/\1/p" "$logs/sandbox.log" | head -n 1
}

reviewed_notice_tutorial() {
  local token="$SANDBOX_OPERATOR_TOKEN_FILE" header="$work/sandbox/producer-authorization"
  local status run review="" out state="" last="" decision="" outcome messages rc
  (umask 077 && printf 'Authorization: Bearer %s\n' "$(<"$SANDBOX_PRODUCER_TOKEN_FILE")" >"$header")
  local body="{\"workflow\":\"reviewed-notice\",\"revision\":\"$revision\",\"input\":{\"applicationId\":\"$SANDBOX_APPLICATION_ID\",\"applicantEmail\":\"applicant@example.org\"}}"
  echo
  echo "\$ curl -X POST $base/v1/runs (applicationId $SANDBOX_APPLICATION_ID)"
  status="$(curl -sS --max-time 10 -o "$logs/start-response.json" -w '%{http_code}' \
    -X POST "$base/v1/runs" -H @"$header" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: run-sh-$suffix" --data "$body")" \
    || die "POST /v1/runs failed to connect; see $logs/coordinator.log"
  cat "$logs/start-response.json"
  echo
  [ "$status" = 201 ] || [ "$status" = 200 ] || die "POST /v1/runs answered $status (above)"
  run="$(sed -n 's/.*"run" *: *"\([^"]*\)".*/\1/p' "$logs/start-response.json")"
  [ -n "$run" ] || die "no run id in the answer to POST /v1/runs"

  # 1. The run submits the review request and waits for the decision.
  for _ in $(seq 1 120); do
    rc=0
    out="$("$ctl" inspect --run "$run" --url "$base" --token-file "$token" 2>&1)" || rc=$?
    [ "$rc" -eq 0 ] || die "coordinatorctl inspect failed (exit $rc): $out"
    review="$(sed -n 's/^casework: review request \([^ ]*\) submitted.*/\1/p' "$logs/sandbox.log" | head -n 1)"
    if [ -n "$review" ] && printf '%s\n' "$out" | grep -q '^  await-decision '; then break; fi
    state="$(printf '%s\n' "$out" | sed -n 's/^state: //p')"
    [ "$state" = running ] || { printf '%s\n' "$out"; die "run $run is $state before it waited for the review (inspect above)"; }
    sleep 0.5
  done
  [ -n "$review" ] || die "run $run submitted no review request within 60 s; see $logs/coordinator.log"
  echo "\$ coordinatorctl inspect --run $run --url $base --token-file $token"
  printf '%s\n' "$out"
  echo
  echo "run $run is waiting for the review: Casework holds review request $review (pending)."

  # 2. The decision: the person's, or --decide's.
  local command
  command="$(printf '%q decide %q' "$sandbox" "$work/sandbox")"
  if [ -n "$decide" ]; then
    echo "\$ $command $decide"
    "$sandbox" decide "$work/sandbox" "$decide" || die "coordinator-sandbox decide $decide failed (above)"
  else
    echo "Approve or decline it, as the reviewer in Casework would, from another terminal:"
    echo "  $command approve"
    echo "  $command decline"
    echo "(waiting for the decision; Ctrl-C stops everything)"
  fi

  # 3. Follow the run to its end (a person may take their time).
  echo "\$ coordinatorctl status --run $run --url $base --token-file $token   (until it ends)"
  local waited=0
  while :; do
    kill -0 "$coordinator_pid" 2>/dev/null || die "coordinator exited; see $logs/coordinator.log"
    rc=0
    out="$("$ctl" status --run "$run" --url "$base" --token-file "$token" 2>&1)" || rc=$?
    [ "$rc" -eq 0 ] || die "coordinatorctl status failed (exit $rc): $out"
    state="$(printf '%s\n' "$out" | sed -n 's/^state: //p')"
    [ -n "$decision" ] || decision="$(reviewed_notice_decision "$review")"
    if [ "$state/$decision" != "$last" ]; then
      echo "  $(date -u +%H:%M:%S) state: $state${decision:+ (review $decision)}"
      last="$state/$decision"
    fi
    [ "$state" = running ] || break
    if [ -n "$decision" ]; then
      waited=$((waited + 1))
      [ "$waited" -le 90 ] || die "run $run is still running 90 s after the decision"
    fi
    sleep 1
  done
  printf '%s\n' "$out"
  echo "\$ coordinatorctl inspect --run $run --url $base --token-file $token"
  "$ctl" inspect --run "$run" --url "$base" --token-file "$token" || die "coordinatorctl inspect failed"

  # 4. Did it end as decided? (The sandbox prints every message on stop.)
  outcome="$(printf '%s\n' "$out" | sed -n 's/^outcome: //p')"
  finish
  decision="$(reviewed_notice_decision "$review")"
  messages="$(grep -c '^messaging: message request' "$logs/sandbox.log" || true)"
  echo
  case "$decision" in
    approved)
      [ "$state" = finished ] && [ "$outcome" = approval-notice-sent ] && [ "$messages" -eq 1 ] \
        || die "the review was approved, but run $run ended $state, outcome '${outcome:-none}', $messages message(s) sent"
      echo "approved: run $run finished approval-notice-sent; Messaging accepted the approval notice"
      ;;
    rejected)
      [ "$state" = finished ] && [ "$outcome" = application-rejected ] && [ "$messages" -eq 0 ] \
        || die "the review was declined, but run $run ended $state, outcome '${outcome:-none}', $messages message(s) sent"
      echo "declined: run $run finished application-rejected; no notice was sent"
      ;;
    *) die "run $run ended $state (outcome '${outcome:-none}') without a decision from the review desk" ;;
  esac
  if [ -n "$decide" ]; then
    local expected=approved
    [ "$decide" = approve ] || expected=rejected
    [ "$decision" = "$expected" ] || die "--decide $decide, but the review was $decision"
  fi
}
