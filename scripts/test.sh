#!/usr/bin/env bash
# Runs every test on a fresh machine: installs what the tests need, then
# formats-checks, lints and tests the whole workspace.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings

echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tee target/test-output.txt
