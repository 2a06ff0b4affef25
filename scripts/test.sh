#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need, starts a
# throw-away PostgreSQL 17 (and Debian's 15, for the "older server refused"
# test), then formats-checks, lints and tests the whole workspace. The
# servers this script started are stopped on exit. Idempotent; runs as root
# (CI) or as any user (see docs/testing-postgres.md).
set -euo pipefail
# The PostgreSQL-backed tests fail (rather than skip) without their servers
# under CI=true; this script always starts them, so it always says so.
export CI="${CI:-true}"
cd "$(dirname "$0")/.."

# Tools the typed-caller tests run over the generated code: TypeScript's tsc
# (npm) and mypy (PyPI), installed once into a cache directory; and the
# contract journey's (server/tests/contract.rs): Schemathesis (PyPI) and
# openapi-typescript with openapi-fetch (npm).
tools="${COORDINATOR_TOOLS_DIR:-$PWD/target/tools}"
mkdir -p "$tools"
if [ ! -x "$tools/tsc/node_modules/.bin/tsc" ]; then
  echo "== installing typescript into $tools/tsc"
  npm install --silent --no-audit --no-fund --prefix "$tools/tsc" typescript >/dev/null
fi
if [ ! -d "$tools/mypy/mypy" ]; then
  echo "== installing mypy into $tools/mypy"
  python3 -m pip install --quiet --disable-pip-version-check --target "$tools/mypy" mypy
fi
if [ ! -d "$tools/schemathesis/schemathesis" ]; then
  echo "== installing schemathesis into $tools/schemathesis"
  python3 -m pip install --quiet --disable-pip-version-check --target "$tools/schemathesis" schemathesis
fi
# kubernetes-validate (PyPI, pinned) for deploy/kubernetes
# (server/tests/cli/kubernetes_files.rs: the Kubernetes version is pinned there).
if [ ! -d "$tools/kubernetes-validate/kubernetes_validate-1.37.0.dist-info" ]; then
  echo "== installing kubernetes-validate into $tools/kubernetes-validate"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$tools/kubernetes-validate" kubernetes-validate==1.37.0
fi
if [ ! -x "$tools/openapi-typescript/node_modules/.bin/openapi-typescript" ]; then
  echo "== installing openapi-typescript and openapi-fetch into $tools/openapi-typescript"
  npm install --silent --no-audit --no-fund --prefix "$tools/openapi-typescript" openapi-typescript openapi-fetch >/dev/null
fi
export TSC="$tools/tsc/node_modules/.bin/tsc" MYPY_PATH="$tools/mypy"
export SCHEMATHESIS_PATH="$tools/schemathesis" OPENAPI_TYPESCRIPT_DIR="$tools/openapi-typescript"
export KUBERNETES_VALIDATE_PATH="$tools/kubernetes-validate"
[ -x "$TSC" ] && [ -d "$MYPY_PATH/mypy" ] || { echo "test.sh: tsc or mypy is missing" >&2; exit 1; }
[ -d "$SCHEMATHESIS_PATH/schemathesis" ] && [ -d "$OPENAPI_TYPESCRIPT_DIR/node_modules/openapi-fetch" ] \
  || { echo "test.sh: schemathesis or openapi-typescript is missing" >&2; exit 1; }

# Debian's Chromium and ChromeDriver for the console's browser journey
# (server/tests/console/).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  echo "== installing chromium and chromium-driver (Debian packages)"
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: chromium and chromium-driver are missing: apt-get install chromium chromium-driver as root" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
fi

# Debian's systemd for `systemd-analyze verify` / `security` over the unit
# in deploy/systemd (server/tests/cli/install_files.rs); systemd is not
# started.
if ! command -v systemd-analyze >/dev/null; then
  echo "== installing systemd (Debian package) for systemd-analyze"
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: systemd-analyze is missing: apt-get install systemd as root" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null
fi

# Debian's Podman, buildah and runc for the image journey
# (server/tests/image/: scripts/image.sh, scripts/image-journey.sh); the
# test fails under CI=true without them.
if ! command -v podman >/dev/null || ! command -v buildah >/dev/null || ! command -v runc >/dev/null; then
  echo "== installing podman, buildah and runc (Debian packages)"
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: podman, buildah or runc is missing: apt-get install podman buildah runc as root" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends podman buildah runc >/dev/null
fi

# Debian's PgBouncer for the journey through a pooler in transaction mode
# (server/tests/production.rs, scripts/pgbouncer.sh), without its service.
if [ ! -x /usr/sbin/pgbouncer ]; then
  echo "== installing pgbouncer (Debian package)"
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: pgbouncer is missing: apt-get install pgbouncer as root" >&2
    exit 1
  fi
  scripts/pgbouncer.sh install
fi

# Debian's libfaketime for the clock skew journey (server/tests/clock_skew/:
# one coordinator's wall clock shifted, loaded into that process alone).
if ! find /usr/lib -path '*faketime/libfaketimeMT.so.1' -print -quit 2>/dev/null | grep -q .; then
  echo "== installing faketime (Debian package)"
  if [ "$(id -u)" -ne 0 ]; then
    echo "test.sh: libfaketime is missing: apt-get install faketime as root" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends faketime >/dev/null
fi

started17=""
started15=""
stop_postgres() {
    if [ -n "$started15" ]; then scripts/postgres15.sh stop >&2 || true; fi
    if [ -n "$started17" ]; then scripts/postgres.sh stop >&2 || true; fi
}
trap stop_postgres EXIT

echo "== PostgreSQL 17 and 15 for the store tests"
# An existing server given through the variables is used as it is.
if [ -z "${COORDINATOR_TEST_DATABASE_URL:-}" ]; then
    if ! scripts/postgres.sh status 2>/dev/null; then started17=1; fi
    eval "$(scripts/postgres.sh start)"
fi
if [ -z "${COORDINATOR_TEST_PG15_URL:-}" ]; then
    if ! scripts/postgres15.sh status 2>/dev/null; then started15=1; fi
    eval "$(scripts/postgres15.sh start)"
fi
export COORDINATOR_TEST_DATABASE_URL COORDINATOR_TEST_MIGRATION_URL COORDINATOR_TEST_RUNTIME_URL
export COORDINATOR_TEST_PG15_URL

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== intra-doc links"
scripts/doc-links.sh

echo "== cargo test"
mkdir -p target
rm -f target/tmp/production-figures.txt target/tmp/contract-figures.txt
cargo test --workspace --quiet 2>&1 | tee target/test-output.txt
if [ -s target/tmp/production-figures.txt ]; then
  echo "== figures of the production journeys (server/tests/production.rs)"
  cat target/tmp/production-figures.txt
fi
if [ -s target/tmp/contract-figures.txt ]; then
  echo "== Schemathesis against the service (server/tests/contract.rs)"
  cat target/tmp/contract-figures.txt
fi
