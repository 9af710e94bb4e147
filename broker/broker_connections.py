"""One ``fetcher.broker_connection`` connection per broker, found by id in the metadata image on
one listener: the pool the transaction marker channel (WriteTxnMarkers) and KIP-890's
verification channel (AddPartitionsToTxn v4) each keep.

A connection is reused while the broker's endpoint stays the same, replaced when the broker moves
(a new host or port), and closed when the broker leaves the image or the listener.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

from pykraft.fetcher.broker_connection import ApiRanges, BrokerConnection, ConnectionSettings
from pykraft.metadata.image import MetadataImage

F = TypeVar("F")


class BrokerConnections(Generic[F]):
    def __init__(
        self,
        metadata: Callable[[], MetadataImage],
        listener_name: str,
        settings: ConnectionSettings,
        negotiate: Callable[[ApiRanges], F],
        *,
        monotonic_ms: Callable[[], int],
        name: str,
    ) -> None:
        self._metadata = metadata
        self._listener_name = listener_name
        self._settings = settings
        self._negotiate = negotiate
        self._monotonic_ms = monotonic_ms
        self._name = name
        self._connections: dict[int, BrokerConnection[F]] = {}

    def get(self, broker_id: int) -> BrokerConnection[F] | None:
        """The connection to ``broker_id``, or None when the image has no such broker on the
        listener."""
        broker = self._metadata().cluster.broker(broker_id)
        endpoint = None if broker is None else broker.endpoint(self._listener_name)
        current = self._connections.get(broker_id)
        if endpoint is None:
            if current is not None:  # the broker left, or left the listener: so does its link
                del self._connections[broker_id]
                current.drop()
            return None
        if current is not None and (current.host, current.port) == (endpoint.host, endpoint.port):
            return current
        if current is not None:
            current.drop()  # the broker moved: its old connection goes
        connection = BrokerConnection(
            broker_id,
            endpoint.host,
            endpoint.port,
            self._settings,
            self._negotiate,
            monotonic_ms=self._monotonic_ms,
            name=self._name,
        )
        self._connections[broker_id] = connection
        return connection

    async def close(self) -> None:
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            with contextlib.suppress(Exception):
                await connection.close()
