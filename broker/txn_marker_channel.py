"""The transaction coordinator's way to the partition leaders: WriteTxnMarkers over the
inter-broker listener (Kafka's ``TransactionMarkerChannelManager`` network side).

The coordinator's shell (``coordinator.transaction``) decides which markers to send, to whom,
and what to retry; this module only finds the leaders in the metadata image and carries one
WriteTxnMarkers request to one broker on a ``fetcher.broker_connection`` connection (one per
broker, reused, replaced when the broker's inter-broker endpoint changes, closed when the broker
leaves the image or the listener: it answers NOT_LEADER_OR_FOLLOWER then), as a follower's fetch
does — the same TLS, SASL and version negotiation. Markers for partitions this broker leads also
go over the network to this broker's own listener, as in Kafka: one path, one authorization
(CLUSTER_ACTION), one set of tests.

A request that fails as a whole (connection refused, timeout, a bad answer) answers every one of
its partitions NETWORK_EXCEPTION, a retriable error: the coordinator looks the leader up again
and resends (``TransactionMarkerRequestCompletionHandler`` on a disconnect).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pykraft.broker.broker_connections import BrokerConnections
from pykraft.fetcher.broker_connection import (
    ApiRanges,
    BrokerConnectionError,
    ConnectionSettings,
)
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.txn_markers import (
    MarkerResults,
    decode_write_txn_markers_response,
    encode_write_txn_markers,
)
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

logger = logging.getLogger(__name__)


def write_txn_markers_version(ranges: ApiRanges) -> int:
    """The highest WriteTxnMarkers version both sides speak (we speak v0-v1)."""
    ours = SUPPORTED_API_VERSIONS[ApiKey.WRITE_TXN_MARKERS]
    theirs = ranges.get(ApiKey.WRITE_TXN_MARKERS)
    if theirs is None or theirs[1] < ours.min_version or theirs[0] > ours.max_version:
        raise ProtocolError(f"the broker serves no WriteTxnMarkers version we speak: {theirs}")
    return min(theirs[1], ours.max_version)


class TxnMarkerChannel:
    """Leaders from the image; WriteTxnMarkers to them on the inter-broker listener."""

    def __init__(
        self,
        broker_id: int,
        metadata: Callable[[], MetadataImage],
        listener_name: str,
        settings: ConnectionSettings,
        *,
        monotonic_ms: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self._metadata = metadata
        self._connections = BrokerConnections(
            metadata,
            listener_name,
            settings,
            write_txn_markers_version,
            monotonic_ms=monotonic_ms,
            name="txn marker channel to broker",
        )

    def leader_of(self, topic_partition: TopicPartition) -> int | None:
        """The partition's leader per the image: -1 while it has none (the marker waits and
        is retried), None when the partition is gone (its marker is dropped, as Kafka's
        completion handler drops a deleted topic's)."""
        topic = self._metadata().topics.by_name.get(topic_partition.topic)
        registration = None if topic is None else topic.partitions.get(topic_partition.partition)
        if registration is None:
            return None
        return registration.leader if registration.has_leader() else -1

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> MarkerResults:
        connection = self._connections.get(broker_id)
        if connection is None:
            return _all(markers, Errors.NOT_LEADER_OR_FOLLOWER)
        try:
            version, body = await connection.exchange(
                ApiKey.WRITE_TXN_MARKERS,
                lambda version: (version, encode_write_txn_markers(markers, version)),
            )
            return connection.decoded(
                lambda: decode_write_txn_markers_response(body, version, markers)
            )
        except BrokerConnectionError as error:
            logger.info("WriteTxnMarkers to broker %d failed: %s", broker_id, error)
            return _all(markers, Errors.NETWORK_EXCEPTION)

    async def close(self) -> None:
        await self._connections.close()


def _all(markers: Sequence[TxnMarker], error: Errors) -> MarkerResults:
    return {(marker.producer_id, tp): error for marker in markers for tp in marker.partitions}
