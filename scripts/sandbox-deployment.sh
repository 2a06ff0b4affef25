# Sourced by scripts/run.sh and scripts/bench.sh (not run on its own): the
# one way a local trial deployment of the starter is written against
# coordinator-sandbox and the PostgreSQL 17 of scripts/postgres.sh.
#
# Needs, from the caller: a `die MESSAGE` function; the variables of
# `$SANDBOX_DIR/sandbox.env` (SANDBOX_SECRETS, SANDBOX_BREG_URL, ...) and
# COORDINATOR_TEST_RUNTIME_URL / _MIGRATION_URL in the environment.

# sandbox_start SANDBOX_BIN DIR LOG: starts coordinator-sandbox on DIR
# (output to LOG), sets `sandbox_pid` (the caller stops it), waits up to
# 30 s for DIR/sandbox.env and reads its variables.
# wait_for_file PID FILE SECONDS NAME LOG: waits until FILE exists (a
# process started in the background says it is ready by writing it); dies
# when PID exits first or after SECONDS, naming NAME and its LOG.
wait_for_file() {
  local pid="$1" file="$2" seconds="$3" name="$4" log="$5"
  for _ in $(seq 1 $((seconds * 4))); do
    [ -f "$file" ] && return 0
    kill -0 "$pid" 2>/dev/null || die "$name exited before it was ready; see $log"
    sleep 0.25
  done
  [ -f "$file" ] || die "$name was not ready within $seconds s; see $log"
}

sandbox_start() {
  "$1" "$2" >"$3" 2>&1 &
  sandbox_pid=$!
  wait_for_file "$sandbox_pid" "$2/sandbox.env" 30 coordinator-sandbox "$3"
  # shellcheck disable=SC1091
  . "$2/sandbox.env"
}

# sandbox_database_role: the runtime role's name, from
# COORDINATOR_TEST_RUNTIME_URL (postgres://ROLE:PASSWORD@HOST/DB).
sandbox_database_role() {
  local role="${COORDINATOR_TEST_RUNTIME_URL#*://}"
  role="${role%%@*}"
  printf '%s' "${role%%:*}"
}

# sandbox_write_secrets AUDIT_DIR: 32 random bytes each for the state key,
# the admission key and the audit key, and the two database URL secrets,
# owner-only, in SANDBOX_SECRETS; creates AUDIT_DIR.
sandbox_write_secrets() {
  (
    umask 077
    for key in state-key-1 admission-key audit-key; do
      head -c 32 /dev/urandom >"$SANDBOX_SECRETS/$key"
    done
    printf '%s' "$COORDINATOR_TEST_RUNTIME_URL" >"$SANDBOX_SECRETS/runtime-database-url"
    printf '%s' "$COORDINATOR_TEST_MIGRATION_URL" >"$SANDBOX_SECRETS/migration-database-url"
    mkdir -p "$1"
  ) || die "cannot write the secret files under $SANDBOX_SECRETS"
  for key in state-key-1 admission-key audit-key; do
    [ "$(wc -c <"$SANDBOX_SECRETS/$key")" -eq 32 ] || die "$SANDBOX_SECRETS/$key is not 32 bytes"
  done
}

# sandbox_package_digest PACKAGE_LOG: the package digest `coordinatorctl
# package` printed (`package digest: sha256:<hex>`).
sandbox_package_digest() {
  local digest
  digest="$(sed -n 's/^package digest: //p' "$1")"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no package digest in coordinatorctl package's output ($1)"
  printf '%s' "$digest"
}

# sandbox_package_revision PACKAGE_DIR: the workflow revision of the
# package's definition.json.
sandbox_package_revision() {
  local revision
  revision="$(grep -o '"revision": *"sha256:[0-9a-f]\{64\}"' "$1/definition.json" | head -n 1 | grep -o 'sha256:[0-9a-f]*' || true)"
  [ -n "$revision" ] || die "no workflow revision in $1/definition.json"
  printf '%s' "$revision"
}

# sandbox_runtime_file STARTER_RUNTIME OUT NAMESPACE DATABASE_ID PACKAGE_DIR
#   DIGEST AUDIT_DIR [WORKFLOW]: the starter's (or another example's)
# runtime.yaml with the sandbox's endpoints, the secrets directory and
# NAMESPACE, completed with a `deployment` section (the runtime role, the
# package, the sandbox's listener ports, issuer and clients, the audit
# journal and the keys). WORKFLOW (default follow-up) is the workflow the
# producer client may start.
sandbox_runtime_file() {
  local starter="$1" out="$2" namespace="$3" database_id="$4" package="$5" digest="$6" audit="$7"
  local workflow="${8:-follow-up}"
  sed -e "s|^namespace: .*|namespace: $namespace|" \
      -e "s|root: /run/registry-coordinator/secrets|root: \"$SANDBOX_SECRETS\"|" \
      -e "s|https://breg.example.org|$SANDBOX_BREG_URL|" \
      -e "s|https://messaging.example.org|$SANDBOX_MESSAGING_URL|" \
      -e "s|https://casework.example.org|${SANDBOX_CASEWORK_URL:-https://casework.example.org}|" \
      -e "s|https://login.example.org/oauth/token|$SANDBOX_TOKEN_ENDPOINT|" \
      "$starter" >"$out"
  if grep -q 'example\.org\|/run/registry-coordinator' "$out"; then
    die "the starter's runtime.yaml has an endpoint scripts/sandbox-deployment.sh does not know; update it ($out)"
  fi
  cat >>"$out" <<YAML
# Completed for a local trial: PostgreSQL from scripts/postgres.sh, issuer
# and products from coordinator-sandbox (scripts/sandbox-deployment.sh).
deployment:
  databaseId: $database_id
  runtimeRole: $(sandbox_database_role)
  packages:
  - root: "$package"
    expectedDigest: "$digest"
  listener:
    bind: 127.0.0.1:$SANDBOX_LISTENER_PORT
    tlsTermination: operator-controlled-upstream
  metricsListener:
    bind: 127.0.0.1:$SANDBOX_METRICS_PORT
  authentication:
    issuer: $SANDBOX_ISSUER
    audience: $SANDBOX_AUDIENCE
    policies:
      $SANDBOX_PRODUCER_CLIENT:
        workflows: [$workflow]
        actions: [start, status, inspect]
      $SANDBOX_OPERATOR_CLIENT:
        actions: [status, inspect, cancel, retry-same, reconcile, move, doctor, restore-hold, release-restore-hold, complete-execution-recovery, release-admission-hold, retain]
        operator: true
  auditFile: "$audit/audit.jsonl"
  auditKeyRef: secret:file/audit-key
  stateKeys:
    "1":
      keyRef: secret:file/state-key-1
  activeStateKey: 1
  admissionKeyRef: secret:file/admission-key
YAML
}
