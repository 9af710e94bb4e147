#!/usr/bin/env bash
# Installs what tests/clients/test_sarama.py needs: Go and Sarama 1.22.1 from Debian's packages
# (golang-go, golang-github-shopify-sarama-dev, when missing), then builds the test's client
# tests/clients/sarama/ into tests/clients/sarama/bin/sarama-client in GOPATH mode against
# /usr/share/gocode (GO111MODULE=off: nothing is downloaded from a module proxy). Idempotent and
# quick: it builds only when a .go file is newer than the binary. Never fails the build: without
# root, apt or a compiler it says so and exits 0, and the Sarama tests then fail with a message
# naming this script.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=apt-install.sh
. "$HERE/.ci/apt-install.sh"
PACKAGE="$HERE/tests/clients/sarama"
BINARY="$PACKAGE/bin/sarama-client"
GOPATH_DIR=/usr/share/gocode
SARAMA="$GOPATH_DIR/src/github.com/Shopify/sarama"

if ! command -v go >/dev/null 2>&1 || [ ! -d "$SARAMA" ]; then
    apt_install install-sarama "golang-go and golang-github-shopify-sarama-dev" \
        golang-go golang-github-shopify-sarama-dev || exit 0
fi

go_build install-sarama "$PACKAGE" "$BINARY"
exit 0
