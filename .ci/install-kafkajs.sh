#!/usr/bin/env bash
# Installs what tests/clients/test_kafkajs.py needs: Node.js and npm (Debian packages, when
# missing), then the KafkaJS version pinned in tests/clients/kafkajs/package-lock.json
# (`npm ci`). Idempotent: npm ci runs only when node_modules is older than the lock file. Never
# fails the build: without root, apt or the npm registry it says so and exits 0, and the KafkaJS
# tests then fail with a message naming this script.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=apt-install.sh
. "$HERE/.ci/apt-install.sh"
PACKAGE="$HERE/tests/clients/kafkajs"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install install-kafkajs "Node.js and npm" nodejs npm || exit 0
fi

STAMP="$PACKAGE/node_modules/.package-lock.json"  # npm writes it on every install
if [ -f "$STAMP" ] && [ "$STAMP" -nt "$PACKAGE/package-lock.json" ]; then
    exit 0
fi
if ! (cd "$PACKAGE" && npm ci --no-audit --no-fund --loglevel=error) >/dev/null; then
    echo "install-kafkajs: npm ci failed in $PACKAGE; run it by hand" >&2
fi
exit 0
