#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need, then
# formats-checks, lints and tests the whole workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the typed-caller tests run over the generated code: TypeScript's tsc
# (npm) and mypy (PyPI), installed once into a cache directory.
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
export TSC="$tools/tsc/node_modules/.bin/tsc" MYPY_PATH="$tools/mypy"
[ -x "$TSC" ] && [ -d "$MYPY_PATH/mypy" ] || { echo "test.sh: tsc or mypy is missing" >&2; exit 1; }

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tee target/test-output.txt
