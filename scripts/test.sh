#!/usr/bin/env bash
# Installs everything the tests need, then runs ruff, mypy, import-linter and pytest (SQLite and PostgreSQL).
# As root it installs PostgreSQL from Debian's packages; it always starts a throwaway cluster itself.
# Extra arguments go to pytest, e.g. scripts/test.sh -k decay
set -euo pipefail
cd "$(dirname "$0")/.."

have_pg() { ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; }
if ! have_pg; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing PostgreSQL (Debian package)…" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL is not installed and this is not root: the PostgreSQL half of the tests will skip" >&2
  fi
fi

# The memory explorer's browser tests drive Debian's chromium through chromium-driver (ADR 0084).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing chromium and chromium-driver (Debian packages)…" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "chromium is not installed and this is not root: the browser tests will skip" >&2
  fi
fi

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q -e ".[dev]"

if have_pg && [ -z "${ENGRAM_TEST_DATABASE_URL:-}" ]; then
  eval "$(scripts/pg-start.sh)"
  export ENGRAM_TEST_DATABASE_URL
fi

.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/lint-imports
.venv/bin/pytest "$@"
