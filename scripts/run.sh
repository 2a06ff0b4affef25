#!/usr/bin/env bash
# The main job on a fresh machine: builds coordinatorctl, creates the starter
# project in a scratch directory, and runs the author's journey of seed 004
# (test, explain, check, package). Pass a directory to keep the results.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-$(mktemp -d)}"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p coordinatorctl
ctl="$root/target/release/coordinatorctl"
cd "$work"
rm -rf follow-up follow-up-package
"$ctl" init --directory follow-up
"$ctl" test --project follow-up
"$ctl" explain --project follow-up
"$ctl" check --project follow-up --runtime-config follow-up/runtime.yaml
"$ctl" package --project follow-up --output follow-up-package
echo "work directory: $work"
