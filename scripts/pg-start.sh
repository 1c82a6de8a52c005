#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the tests and print its URL on stdout.
# Debian's `postgresql` package must be installed (scripts/test.sh installs it when run as root).
# Usage: eval "$(scripts/pg-start.sh)"   → exports ENGRAM_TEST_DATABASE_URL
set -euo pipefail
port="${ENGRAM_TEST_PG_PORT:-54329}"
pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -n "$pgbin" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }
if "$pgbin/pg_isready" -h 127.0.0.1 -p "$port" -q 2>/dev/null; then
  echo "export ENGRAM_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:$port/postgres"
  exit 0
fi
root="$(mktemp -d /tmp/engram-pg.XXXXXX)"
mkdir -p "$root/data" "$root/sock"
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown -R postgres "$root"
run "'$pgbin/initdb' -D '$root/data' -A trust -U postgres --no-sync" >/dev/null
run "'$pgbin/pg_ctl' -D '$root/data' -l '$root/log' -w -o \"-p $port -k '$root/sock' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200\" start" >/dev/null
echo "export ENGRAM_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:$port/postgres"
