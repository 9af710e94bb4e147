"""The marker channel's version choice (pure): the highest WriteTxnMarkers version both ends
speak (v0-v1, as Kafka 3.9; v0 is v1 without flexible encoding); a peer without one cannot take
markers. The channel's requests
over real TCP are in ``tests/integration/test_txn_marker_channel.py``."""

from __future__ import annotations

import pytest

from pykraft.broker.txn_marker_channel import write_txn_markers_version
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import ProtocolError


@pytest.mark.parametrize(
    ("theirs", "expected"),
    [
        ((0, 1), 1),  # Kafka 2.x-3.x
        ((1, 1), 1),  # Kafka 4.x
        ((1, 2), 1),  # a newer peer: ours is the highest both speak
        ((0, 0), 0),  # a peer with v0 only
    ],
)
def test_the_highest_common_version(theirs: tuple[int, int], expected: int) -> None:
    assert write_txn_markers_version({ApiKey.WRITE_TXN_MARKERS: theirs}) == expected


@pytest.mark.parametrize("ranges", [{}, {ApiKey.WRITE_TXN_MARKERS: (2, 3)}])
def test_a_peer_without_a_common_version_is_refused(ranges: dict[int, tuple[int, int]]) -> None:
    with pytest.raises(ProtocolError):
        write_txn_markers_version(ranges)
