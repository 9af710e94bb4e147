#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver for tests/integration/test_console_browser.py
# (the web console in a real headless browser, driven by Selenium). Idempotent: does nothing
# when both are on PATH. Never fails the build: without root or apt it says so and exits 0, and
# the browser test then fails with a message naming this script.
set -uo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
# shellcheck source=apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install install-chromium "chromium and chromium-driver" chromium chromium-driver || exit 0
command -v chromedriver >/dev/null 2>&1 || echo "install-chromium: chromedriver still not on PATH" >&2
exit 0
