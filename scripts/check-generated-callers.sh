#!/bin/sh
# Installs TypeScript (npm) and mypy (pip) into a temporary directory, then
# runs the typed-caller tests with them, so that the generated TypeScript is
# checked with `tsc --strict` and the generated Python with `py_compile` and
# `mypy --strict`.
#
# Usage: scripts/check-generated-callers.sh [TOOLS_DIR]
# TOOLS_DIR defaults to a fresh temporary directory; pass one to reuse it.
set -eu
tools="${1:-$(mktemp -d)}"
if [ ! -x "$tools/tsc/node_modules/.bin/tsc" ]; then
    npm install --silent --prefix "$tools/tsc" typescript
fi
if [ ! -d "$tools/mypy/mypy" ]; then
    python3 -m pip install --quiet --target "$tools/mypy" mypy
fi
cd "$(dirname "$0")/.."
TSC="$tools/tsc/node_modules/.bin/tsc" MYPY_PATH="$tools/mypy" \
    cargo test -p coordinator-callers --test typed_callers -- --nocapture
