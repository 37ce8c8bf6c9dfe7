#!/usr/bin/env bash
# The web UI (ui/: TypeScript, Vite), embedded by `needle serve` at compile time.
#   scripts/ui.sh build   install ui/'s npm packages (npm ci) and build ui/dist
#   scripts/ui.sh test    the builder's unit tests (vitest), then the browser tests: Debian's
#                         chromium (installed with apt-get when /usr/bin/chromium is missing)
#                         driving a real `needle serve` ($UI_TEST_BIN, default target/debug/needle)
# UI_DOC_IMAGES=1 makes the browser tests refresh the screenshots in docs/img/.
set -euo pipefail
cd "$(dirname "$0")/../ui"

install() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund
  fi
}

case "${1:-build}" in
  build)
    install
    npm run build
    ;;
  test)
    install
    npx vitest run
    if [ ! -x /usr/bin/chromium ]; then
      echo "(installing Debian's chromium for the browser tests)"
      apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }
    fi
    UI_TEST_BIN="${UI_TEST_BIN:-$PWD/../target/debug/needle}" node e2e/run.mjs
    ;;
  *)
    echo "usage: scripts/ui.sh build|test" >&2
    exit 2
    ;;
esac
