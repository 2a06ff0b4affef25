#!/usr/bin/env bash
# The longer Schemathesis run before a release: server/tests/contract.rs's
# journey (docs/openapi.json against the real `coordinator` on PostgreSQL
# 17, a producer's and an operator's token, every check, positive and
# negative data, the stateful phase, seed 27) with more examples per
# operation than scripts/test.sh's 100.
#
#   scripts/contract.sh [EXAMPLES]     # default 1000
#
# Installs Schemathesis into the tools cache as scripts/test.sh does,
# starts (or reuses) the test PostgreSQL 17 and stops it at exit if it
# started it. Prints the figures; any failure fails the script.
set -euo pipefail
export CI="${CI:-true}"
cd "$(dirname "$0")/.."

tools="${COORDINATOR_TOOLS_DIR:-$PWD/target/tools}"
if [ ! -d "$tools/schemathesis/schemathesis" ]; then
  echo "== installing schemathesis into $tools/schemathesis"
  python3 -m pip install --quiet --disable-pip-version-check --target "$tools/schemathesis" schemathesis
fi
export SCHEMATHESIS_PATH="$tools/schemathesis"
export COORDINATOR_CONTRACT_EXAMPLES="${1:-1000}"

started=""
stop_postgres() {
  if [ -n "$started" ]; then scripts/postgres.sh stop >&2 || true; fi
}
trap stop_postgres EXIT
if [ -z "${COORDINATOR_TEST_DATABASE_URL:-}" ]; then
  if ! scripts/postgres.sh status 2>/dev/null; then started=1; fi
  eval "$(scripts/postgres.sh start)"
fi
export COORDINATOR_TEST_DATABASE_URL COORDINATOR_TEST_MIGRATION_URL COORDINATOR_TEST_RUNTIME_URL

mkdir -p target/tmp
rm -f target/tmp/contract-figures.txt
cargo test -p registry-coordinator --test contract schemathesis -- --nocapture
cat target/tmp/contract-figures.txt
