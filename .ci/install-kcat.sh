#!/usr/bin/env bash
# Installs kcat (Debian package) for tests/clients/test_kcat.py. Idempotent: does nothing when
# kcat is already on PATH. Never fails the build: without root or apt it says so and exits 0,
# and the kcat tests then fail with a message naming this script.
set -uo pipefail

if command -v kcat >/dev/null 2>&1; then
    exit 0
fi
# shellcheck source=apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install install-kcat kcat kcat || exit 0
command -v kcat >/dev/null 2>&1 || echo "install-kcat: kcat still not on PATH" >&2
exit 0
