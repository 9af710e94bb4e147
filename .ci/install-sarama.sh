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
PACKAGE="$HERE/tests/clients/sarama"
BINARY="$PACKAGE/bin/sarama-client"
GOPATH_DIR=/usr/share/gocode
SARAMA="$GOPATH_DIR/src/github.com/Shopify/sarama"

if ! command -v go >/dev/null 2>&1 || [ ! -d "$SARAMA" ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-sarama: apt-get not found; install golang-go and golang-github-shopify-sarama-dev by hand" >&2
        exit 0
    fi
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"
        else
            echo "install-sarama: not root and no passwordless sudo; install golang-go and golang-github-shopify-sarama-dev by hand" >&2
            exit 0
        fi
    fi
    if ! ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
            golang-go golang-github-shopify-sarama-dev) >/dev/null; then
        echo "install-sarama: apt-get could not install golang-go and golang-github-shopify-sarama-dev" >&2
        exit 0
    fi
fi

if [ -x "$BINARY" ] && [ -z "$(find "$PACKAGE" -maxdepth 1 -name '*.go' -newer "$BINARY")" ]; then
    exit 0
fi
mkdir -p "$PACKAGE/bin"
# The build cache lives beside the binary: it needs no $HOME, and `git clean` takes both away.
if ! LOG="$(cd "$PACKAGE" && GO111MODULE=off GOPATH="$GOPATH_DIR" GOFLAGS= \
        GOCACHE="$PACKAGE/bin/go-build-cache" go build -o "$BINARY.tmp" . 2>&1)"; then
    echo "install-sarama: go build failed in $PACKAGE:" >&2
    echo "$LOG" >&2
    exit 0
fi
mv "$BINARY.tmp" "$BINARY"
exit 0
