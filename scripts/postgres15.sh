#!/usr/bin/env bash
# Debian's PostgreSQL 15 as a throw-away test server, for the test that a
# server older than 17 is refused.
#
#   scripts/postgres15.sh start|stop|status|env|destroy [--port N] [--dir D]
#
# Same behaviour as scripts/postgres.sh (which does the work), except:
# binaries from Debian's postgresql-15 (/usr/lib/postgresql/15/bin, installed
# with apt-get if missing; Debian's own cluster is never used or started),
# default port 54315, default dir /tmp/coordinator-pg15-PORT, one database
# `coordinator`, one role (coordinator_admin, superuser) and one variable:
#   COORDINATOR_TEST_PG15_URL=postgres://coordinator_admin:...@127.0.0.1:PORT/coordinator
# If COORDINATOR_TEST_PG15_URL is already set (and neither --port nor --dir
# is given), start/stop do nothing and env echoes it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
COORDINATOR_PG_FLAVOR=15 COORDINATOR_PG_PROG="$(basename "$0")" exec bash "$here/postgres.sh" "$@"
