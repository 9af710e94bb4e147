"""The way to the transaction coordinators for KIP-890 verification: AddPartitionsToTxn v4 over
the inter-broker listener (the network side of Kafka's ``AddPartitionsToTxnManager``, an
``InterBrokerSendThread``).

One ``fetcher.broker_connection`` connection per coordinator broker, reused, replaced when the
broker's inter-broker endpoint changes — the same TLS, SASL and version negotiation as the
replica fetchers and the transaction marker channel (``broker.txn_marker_channel``). A
coordinator on this broker is reached over the network too, as in Kafka: one path, one
authorization (CLUSTER_ACTION). This module carries bytes only; what an outcome means is
``broker.add_partitions_to_txn_batches``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pykraft.broker.add_partitions_to_txn_batches import Outcome, Unanswered
from pykraft.broker.broker_connections import BrokerConnections
from pykraft.fetcher.broker_connection import (
    ApiRanges,
    BrokerConnectionError,
    ConnectionSettings,
)
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.add_partitions_to_txn import (
    FIRST_BROKER_VERSION,
    VerifyTransaction,
    decode_add_partitions_to_txn_response,
    encode_verify_request,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS

logger = logging.getLogger(__name__)

# The peer speaks no AddPartitionsToTxn version a broker may send (below v4).
NO_BROKER_VERSION = -1


def add_partitions_to_txn_version(ranges: ApiRanges) -> int:
    """The highest broker version (v4+) both sides speak, else ``NO_BROKER_VERSION``."""
    ours = SUPPORTED_API_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN]
    theirs = ranges.get(ApiKey.ADD_PARTITIONS_TO_TXN)
    if theirs is None:
        return NO_BROKER_VERSION
    version = min(theirs[1], ours.max_version)
    if version < max(theirs[0], FIRST_BROKER_VERSION):
        return NO_BROKER_VERSION
    return version


class AddPartitionsToTxnChannel:
    """AddPartitionsToTxn v4+ to a broker, by id, on the inter-broker listener."""

    def __init__(
        self,
        metadata: Callable[[], MetadataImage],
        listener_name: str,
        settings: ConnectionSettings,
        *,
        monotonic_ms: Callable[[], int],
    ) -> None:
        self._connections = BrokerConnections(
            metadata,
            listener_name,
            settings,
            add_partitions_to_txn_version,
            monotonic_ms=monotonic_ms,
            name="transaction verification to broker",
        )

    async def send(self, broker_id: int, transactions: Sequence[VerifyTransaction]) -> Outcome:
        """Ask ``broker_id`` to verify ``transactions``; never raises for the network."""
        connection = self._connections.get(broker_id)
        if connection is None:
            return Unanswered.NETWORK  # the broker left; the producer retries and finds anew
        try:
            if await connection.versions() == NO_BROKER_VERSION:
                logger.warning(
                    "broker %d serves no AddPartitionsToTxn v4: transaction verification is "
                    "skipped for its transactions",
                    broker_id,
                )
                return Unanswered.VERSION_MISMATCH
            version, body = await connection.exchange(
                ApiKey.ADD_PARTITIONS_TO_TXN,
                lambda version: (version, encode_verify_request(transactions, version)),
            )
            return connection.decoded(lambda: decode_add_partitions_to_txn_response(body, version))
        except BrokerConnectionError as error:
            logger.info("AddPartitionsToTxn to broker %d failed: %s", broker_id, error)
            return Unanswered.NETWORK

    async def close(self) -> None:
        await self._connections.close()
