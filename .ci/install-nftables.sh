#!/usr/bin/env bash
# Installs nft (Debian's nftables package) for tests/chaos/test_network_faults.py, which drops
# packets between nodes in network namespaces with nftables rules. Idempotent: does nothing when
# nft is already on PATH. Never fails the build: without root or apt it says so and exits 0, and
# the network-fault tests then skip, naming this script (tests/chaos/netns.py).
set -uo pipefail

if command -v nft >/dev/null 2>&1; then
    exit 0
fi
# shellcheck source=apt-install.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install install-nftables nft nftables || exit 0
command -v nft >/dev/null 2>&1 || echo "install-nftables: nft still not on PATH" >&2
exit 0
