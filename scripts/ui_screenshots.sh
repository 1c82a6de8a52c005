#!/usr/bin/env bash
# Regenerates the memory explorer's screenshots in docs/ui/ (shown in README and docs/ui.md): runs
# the browser tests with ENGRAM_UI_SCREENSHOTS set, so that each saves its main page as it looks
# (`screenshot(browser, name)` in tests/browser/: beings, being, node, search, log, admin).
# Needs Debian's chromium and chromium-driver (scripts/test.sh installs them as root).
# Extra arguments go to pytest, e.g. scripts/ui_screenshots.sh -k search
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "chromium and chromium-driver are needed: apt-get install chromium chromium-driver" >&2
  exit 2
fi
out=docs/ui
mkdir -p "$out"
# A missing browser must fail here rather than skip: CI=1 makes the browser fixture insist.
CI=1 ENGRAM_UI_SCREENSHOTS="$out" .venv/bin/pytest -q -p no:cacheprovider tests/browser "$@"
echo "screenshots in $out:" >&2
ls -1 "$out"/*.png >&2
