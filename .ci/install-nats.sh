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

if ! command -v nats-server >/dev/null 2>&1 || ! command -v go >/dev/null 2>&1 \
        || [ ! -d /usr/share/gocode/src/github.com/nats-io/nats.go ]; then
    apt_install install-nats "nats-server, golang-go and golang-github-nats-io-go-nats-dev" \
        nats-server golang-go golang-github-nats-io-go-nats-dev || exit 0
fi

go_build install-nats "$PACKAGE" "$BINARY"
exit 0
