"""ReplicaFetcherManager: which fetcher replicates each followed partition.

Theory of operation
-------------------
Kafka's ``AbstractFetcherManager`` / ``ReplicaFetcherManager`` on one event loop. A followed
partition belongs to the fetcher keyed by (leader broker id, fetcher id), with
``fetcher_id(topic, partition, num.replica.fetchers)`` (Kafka's ``getFetcherId``). Each fetcher
is one ``ReplicaFetcher`` task with one connection to its leader, so a broker holds at most
``num.replica.fetchers`` fetchers (and connections) per leader broker.

``add_fetcher_for_partitions`` (Kafka's ``addFetcherForPartitions``): per key, the existing
fetcher is reused while its leader's address (host, port) is unchanged; when the address changed
(the leader restarted elsewhere) the old fetcher is shut down and a new one takes over its
partitions with their fetch states. A partition whose leader has no known endpoint is not
fetched (Kafka logs that the leader is not alive and waits for the next metadata change). A
partition moving to another key (a new leader) leaves its old fetcher first. Adding a partition
clears any earlier failure.

``remove_fetcher_for_partitions`` takes partitions out of whichever fetcher holds them and out
of the failed set. A fetcher left without partitions is shut down on the next event-loop turn
(Kafka's ``shutdownIdleFetcherThreads`` after a metadata delta), not at once: ``ReplicaManager``
removes and re-adds a partition in one delta when its leader epoch moves, and the fetcher and its
connection should survive that.

The two methods are synchronous (``replica.data_path.FetcherManager``), as ReplicaManager
calls them while applying metadata on the event loop; fetchers start and stop as tasks on the
running loop and ``shutdown`` awaits them all.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Protocol

import attrs

from pykraft.fetcher.broker_connection import ConnectionSettings
from pykraft.fetcher.fetcher_config import FetcherConfig, PartitionStart
from pykraft.fetcher.fetcher_id import fetcher_id
from pykraft.fetcher.follower_log import LogLookup
from pykraft.fetcher.leader_endpoint import EndpointSettings, KafkaLeaderEndpoint, LeaderEndpoint
from pykraft.fetcher.replica_fetcher import BytesInListener, ReplicaFetcher
from pykraft.fetcher.replication_quota import ReplicationQuota
from pykraft.fetcher.responses import FailureReason
from pykraft.storage.clock import Clock
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class LeaderAddress(Protocol):
    """A leader's inter-broker listener (``metadata.records.BrokerEndpoint``)."""

    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


class FetchStart(Protocol):
    """Where a follower starts (``replica.data_path.InitialFetchState``)."""

    @property
    def topic_id(self) -> str: ...
    @property
    def leader_id(self) -> int: ...
    @property
    def leader_endpoint(self) -> LeaderAddress | None: ...
    @property
    def current_leader_epoch(self) -> int: ...


@attrs.frozen(order=True)
class FetcherKey:
    """Kafka's ``BrokerIdAndFetcherId``."""

    leader_id: int
    fetcher_id: int


# (leader id, host, port, fetcher id) -> the endpoint a new fetcher talks through.
EndpointFactory = Callable[[int, str, int, int], LeaderEndpoint]


def parse_topic_id(text: str) -> uuid.UUID | None:
    """Kafka's ``Uuid.fromString`` for a topic id; None for an absent or zero id (the fetcher
    then names the topic, Fetch v12)."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None
    if len(text) != 22 or len(raw) != 16 or raw == bytes(16):
        return None
    return uuid.UUID(bytes=raw)


class ReplicaFetcherManager:
    def __init__(
        self,
        config: FetcherConfig,
        log_for: LogLookup,
        *,
        clock: Clock,
        endpoint_factory: EndpointFactory | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
        quota: ReplicationQuota | None = None,
        on_replication_bytes_in: BytesInListener | None = None,
    ) -> None:
        self.config = config
        self._on_replication_bytes_in = on_replication_bytes_in
        # The follower replication throttle every fetcher shares (KIP-73).
        self.quota = quota
        self._log_for = log_for
        self._broker_epoch = broker_epoch
        self._endpoint_factory = endpoint_factory or self._kafka_endpoint
        self._clock = clock
        # Invariant: _where[tp] == key iff fetchers[key] holds tp; _addresses has the keys of
        # _fetchers.
        self._fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._addresses: dict[FetcherKey, tuple[str, int]] = {}
        self._where: dict[TopicPartition, FetcherKey] = {}
        self._failed: dict[TopicPartition, FailureReason] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._idle_check_scheduled = False
        # Told when a follower's local log fails (KafkaStorageException): the broker takes
        # the log dir offline (Kafka's LogDirFailureChannel).
        self.on_storage_error: Callable[[TopicPartition], None] | None = None

    def _kafka_endpoint(self, leader_id: int, host: str, port: int, fetcher: int) -> LeaderEndpoint:
        settings = EndpointSettings(
            replica_id=self.config.replica_id,
            connection=ConnectionSettings(
                client_id=f"broker-{self.config.replica_id}-fetcher-{fetcher}",
                socket_timeout_ms=self.config.socket_timeout_ms,
                security=self.config.client_security,
            ),
        )
        return KafkaLeaderEndpoint(
            leader_id,
            host,
            port,
            settings,
            broker_epoch=self._broker_epoch,
            monotonic_ms=self._clock.monotonic_ms,
        )

    # ------------------------------------------------------------------ views

    @property
    def fetchers(self) -> Mapping[FetcherKey, ReplicaFetcher]:
        return self._fetchers

    @property
    def failed_partitions(self) -> Mapping[TopicPartition, FailureReason]:
        return self._failed

    def fetcher_for(self, topic_partition: TopicPartition) -> ReplicaFetcher | None:
        key = self._where.get(topic_partition)
        return None if key is None else self._fetchers[key]

    def key_for(self, topic_partition: TopicPartition, leader_id: int) -> FetcherKey:
        topic, partition = topic_partition.topic, topic_partition.partition
        return FetcherKey(leader_id, fetcher_id(topic, partition, self.config.num_replica_fetchers))

    # ------------------------------------------------------------------ FetcherManager

    def add_fetcher_for_partitions(self, partitions: Mapping[TopicPartition, FetchStart]) -> None:
        groups: dict[FetcherKey, tuple[tuple[str, int], dict[TopicPartition, PartitionStart]]] = {}
        for topic_partition, start in partitions.items():
            endpoint = start.leader_endpoint
            if endpoint is None:
                logger.warning(
                    "not fetching %s: leader %d has no known endpoint",
                    topic_partition,
                    start.leader_id,
                )
                continue
            key = self.key_for(topic_partition, start.leader_id)
            address, starts = groups.setdefault(key, ((endpoint.host, endpoint.port), {}))
            starts[topic_partition] = PartitionStart(
                parse_topic_id(start.topic_id), start.current_leader_epoch
            )
        for key, (address, starts) in sorted(groups.items()):
            fetcher = self._fetcher_at(key, address)
            for topic_partition in starts:
                self._failed.pop(topic_partition, None)
                previous = self._where.get(topic_partition)
                if previous is not None and previous != key:
                    self._fetchers[previous].remove_partitions([topic_partition])
                self._where[topic_partition] = key
            fetcher.add_partitions(starts)
        self._schedule_idle_check()

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None:
        for topic_partition in partitions:
            self._failed.pop(topic_partition, None)
            key = self._where.pop(topic_partition, None)
            if key is not None:
                self._fetchers[key].remove_partitions([topic_partition])
        self._schedule_idle_check()

    # ------------------------------------------------------------------ fetchers

    def _fetcher_at(self, key: FetcherKey, address: tuple[str, int]) -> ReplicaFetcher:
        """The fetcher for ``key``: reused at the same address, replaced when it moved."""
        current = self._fetchers.get(key)
        if current is not None and self._addresses[key] == address:
            return current
        fetcher = ReplicaFetcher(
            key.fetcher_id,
            self._endpoint_factory(key.leader_id, address[0], address[1], key.fetcher_id),
            self._log_for,
            self.config,
            on_partition_failed=self._on_partition_failed,
            clock=self._clock,
            quota=self.quota,
            on_replication_bytes_in=self._on_replication_bytes_in,
        )
        if current is not None:
            logger.info(
                "leader %d moved from %s:%d to %s:%d; restarting %r",
                key.leader_id,
                *self._addresses[key],
                *address,
                current,
            )
            fetcher.adopt_partitions(current.remove_partitions(list(current.partition_states)))
            self._retire(current)
        self._fetchers[key] = fetcher
        self._addresses[key] = address
        fetcher.start()
        return fetcher

    def _on_partition_failed(self, topic_partition: TopicPartition, reason: FailureReason) -> None:
        self._where.pop(topic_partition, None)
        self._failed[topic_partition] = reason
        self._schedule_idle_check()
        if reason is FailureReason.STORAGE_ERROR and self.on_storage_error is not None:
            self.on_storage_error(topic_partition)

    def _schedule_idle_check(self) -> None:
        if not self._idle_check_scheduled:
            self._idle_check_scheduled = True
            asyncio.get_running_loop().call_soon(self.shutdown_idle_fetchers)

    def shutdown_idle_fetchers(self) -> None:
        """Kafka ``shutdownIdleFetcherThreads``: stop fetchers that replicate nothing."""
        self._idle_check_scheduled = False
        for key, fetcher in list(self._fetchers.items()):
            if fetcher.partition_count == 0:
                del self._fetchers[key], self._addresses[key]
                self._retire(fetcher)

    def _retire(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.shutdown(), name=f"stop {fetcher!r}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def shutdown(self) -> None:
        """Stop every fetcher and wait until they and their connections are closed."""
        for fetcher in self._fetchers.values():
            self._retire(fetcher)
        self._fetchers.clear()
        self._addresses.clear()
        self._where.clear()
        await asyncio.gather(*self._closing, return_exceptions=True)
