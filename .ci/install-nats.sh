#!/usr/bin/env bash
# Installs what bench/peers.py needs: NATS JetStream's server and Go client from Debian's packages
# (nats-server, golang-go, golang-github-nats-io-go-nats-dev, when missing), then builds the
# bench's publisher bench/nats/ into bench/nats/bin/natsbench in GOPATH mode against
# /usr/share/gocode (GO111MODULE=off: nothing is downloaded from a module proxy). Idempotent: it
# builds only when a .go file is newer than the binary. Like the other install scripts it never
# fails the build; bench/peers.py then stops with a message naming this script.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=apt-install.sh
. "$HERE/.ci/apt-install.sh"
PACKAGE="$HERE/bench/nats"
BINARY="$PACKAGE/bin/natsbench"
GOPATH_DIR=/usr/share/gocode

if ! command -v nats-server >/dev/null 2>&1 || ! command -v go >/dev/null 2>&1 \
        || [ ! -d "$GOPATH_DIR/src/github.com/nats-io/nats.go" ]; then
    apt_install install-nats "nats-server, golang-go and golang-github-nats-io-go-nats-dev" \
        nats-server golang-go golang-github-nats-io-go-nats-dev || exit 0
fi

if [ -x "$BINARY" ] && [ -z "$(find "$PACKAGE" -maxdepth 1 -name '*.go' -newer "$BINARY")" ]; then
    exit 0
fi
mkdir -p "$PACKAGE/bin"
if ! LOG="$(cd "$PACKAGE" && GO111MODULE=off GOPATH="$GOPATH_DIR" GOFLAGS= \
        GOCACHE="$PACKAGE/bin/go-build-cache" go build -o "$BINARY.tmp" . 2>&1)"; then
    echo "install-nats: go build failed in $PACKAGE:" >&2
    echo "$LOG" >&2
    exit 0
fi
mv "$BINARY.tmp" "$BINARY"
exit 0
