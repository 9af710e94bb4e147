"""The partitions this broker hosts and the data path through them (Kafka's ``ReplicaManager``).

Theory of operation
-------------------
Metadata: ``apply_delta(changes, new_image, now_ms)`` acts on ``local_changes(delta, broker_id)``
in Kafka's order (``ReplicaManager.applyDelta``): first deletes (stop the fetcher, stop the
partition, delete the log through ``LogManager``), then leaders (stop fetching, open or create
the log with the topic's configs, ``make_leader``), then followers (``make_follower``; when the
leader epoch moved, hand the partition to the fetcher manager starting at the log end). A
partition whose topic id changed under the same name (a topic deleted and re-created while this
broker was away) loses its old log first. Delayed fetches on every changed partition answer now.

Produce: ``append_records`` checks ``acks`` (-1, 0, 1, else INVALID_REQUIRED_ACKS for every
partition, ``isValidRequiredAcks``), refuses internal topics to clients, and appends each
partition through ``Partition.append_records_to_leader``; every failure becomes that partition's
Kafka error code. acks=-1 is answered as soon as the local append is done: with replication
factor 1 the high watermark is already past the batch. Waiting for followers (delayed produce)
comes with replication; until then ``min.insync.replicas`` is enforced before the append.

Fetch: ``read_from_log`` reads every partition in request order with Kafka's size rules
(``readFromLog``): each partition gets at most ``min(partition_max_bytes, bytes left of
max_bytes)``, and the first non-empty partition may exceed both with one whole batch.
``fetch_messages`` answers at once when Kafka would (``max_wait_ms <= 0``, no partitions,
``min_bytes`` reached, an error, a diverging epoch), otherwise waits in ``DelayedFetches`` and
reads again. Appended bytes wake waiters at once: right for followers and, with replication
factor 1, for consumers. With more replicas a waiting consumer may wake before the high
watermark covers the new bytes and then answers with what it can read (possibly nothing, never
uncommitted data); replication should feed high-watermark moves to the purgatory instead.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import attrs

from broker.partition import (
    FetchIsolation,
    LeaderAndIsr,
    LogReadInfo,
    Partition,
    PartitionError,
)
from broker.purgatory import DelayedFetches, FetchCompletion
from metadata.image import MetadataImage
from metadata.local_changes import LocalReplicaChanges, PartitionInfo, PartitionKey
from metadata.records import NO_LEADER, BrokerEndpoint, ConfigResourceType
from protocol.errors import Errors
from storage.file_slice import FileSlice
from storage.leader_epoch_cache import OffsetAndEpoch
from storage.log_config import LogConfig, LogConfigError
from storage.log_manager import LogManager
from storage.partition_log import OffsetAndTimestamp
from storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# Kafka's Topic.INTERNAL_TOPICS: clients may not produce to them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
MIN_INSYNC_REPLICAS = "min.insync.replicas"
VALID_REQUIRED_ACKS = (-1, 0, 1)
UNKNOWN_OFFSET = -1


# ---------------------------------------------------------------------------- fetcher hand-off


@attrs.frozen
class InitialFetchState:
    """Where a follower starts fetching (Kafka's ``InitialFetchState``)."""

    topic_id: str
    leader_id: int
    # The leader's inter-broker endpoint; None when the image does not know it (yet).
    leader_endpoint: BrokerEndpoint | None
    current_leader_epoch: int
    init_offset: int


class FetcherManager(Protocol):
    """What ReplicaManager needs from replication (Kafka's ``ReplicaFetcherManager``)."""

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, InitialFetchState]
    ) -> None: ...

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None: ...


class RecordedFetcherManager:
    """The hand-off to replication, recorded: the partitions to follow, their leader and epoch.

    It stands where ``fetcher.ReplicaFetcherManager`` will (the replication issue); it fetches
    nothing, and its ``assignments`` are what the fetchers would be running.
    """

    def __init__(self) -> None:
        self.assignments: dict[TopicPartition, InitialFetchState] = {}

    def add_fetcher_for_partitions(
        self, partitions: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        self.assignments.update(partitions)

    def remove_fetcher_for_partitions(self, partitions: Collection[TopicPartition]) -> None:
        for topic_partition in partitions:
            self.assignments.pop(topic_partition, None)


# ---------------------------------------------------------------------------- results


@attrs.frozen(kw_only=True)
class AppendResult:
    """One partition's produce outcome (Kafka's ``PartitionResponse``)."""

    error: Errors = Errors.NONE
    base_offset: int = UNKNOWN_OFFSET
    log_append_time_ms: int = -1
    log_start_offset: int = UNKNOWN_OFFSET
    error_message: str | None = None
    # The bytes appended (0 for a duplicate retry or an error).
    appended_bytes: int = 0


@attrs.frozen(kw_only=True)
class PartitionFetch:
    """One partition of a Fetch request (Kafka's ``FetchRequest.PartitionData``)."""

    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@attrs.frozen(kw_only=True)
class FetchParams:
    """A Fetch request's shared parameters (Kafka's ``FetchParams``)."""

    replica_id: int  # -1 for consumers, else the follower's broker id
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int = 0  # 0 READ_UNCOMMITTED, 1 READ_COMMITTED
    partitions: tuple[PartitionFetch, ...]

    @property
    def isolation(self) -> FetchIsolation:
        return FetchIsolation.of(self.replica_id, self.isolation_level)


@attrs.frozen(kw_only=True)
class LogReadResult:
    """One partition's read (Kafka's ``LogReadResult``); offsets are -1 on an error."""

    topic_partition: TopicPartition
    error: Errors = Errors.NONE
    error_message: str | None = None
    slices: tuple[FileSlice, ...] = ()
    high_watermark: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_stable_offset: int = UNKNOWN_OFFSET
    diverging_epoch: OffsetAndEpoch | None = None

    @property
    def size_in_bytes(self) -> int:
        return sum(piece.length for piece in self.slices)

    @classmethod
    def of(cls, topic_partition: TopicPartition, info: LogReadInfo) -> LogReadResult:
        return cls(
            topic_partition=topic_partition,
            slices=info.fetched_data.slices,
            high_watermark=info.high_watermark,
            log_start_offset=info.log_start_offset,
            log_end_offset=info.log_end_offset,
            last_stable_offset=info.last_stable_offset,
            diverging_epoch=info.diverging_epoch,
        )


# ---------------------------------------------------------------------------- the manager


class ReplicaManager:
    def __init__(
        self,
        *,
        broker_id: int,
        log_manager: LogManager,
        fetcher_manager: FetcherManager,
        delayed_fetches: DelayedFetches | None = None,
        inter_broker_listener_name: str = "PLAINTEXT",
        min_insync_replicas: int = 1,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.fetcher_manager = fetcher_manager
        self.delayed_fetches = delayed_fetches or DelayedFetches()
        self.inter_broker_listener_name = inter_broker_listener_name
        self.min_insync_replicas = min_insync_replicas
        self.image = MetadataImage.EMPTY
        self._partitions: dict[TopicPartition, Partition] = {}

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        return dict(self._partitions)

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self._partitions.get(topic_partition)

    def partition_or_error(self, topic_partition: TopicPartition) -> Partition:
        """The hosted partition, else the error Kafka's ``getPartitionOrException`` gives."""
        partition = self._partitions.get(topic_partition)
        if partition is not None:
            return partition
        topic = self.image.topics.by_name.get(topic_partition.topic)
        if topic is not None and topic_partition.partition in topic.partitions:
            raise PartitionError(
                Errors.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.broker_id} is not a replica of {topic_partition}",
            )
        raise PartitionError(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {topic_partition}"
        )

    # ------------------------------------------------------------------ metadata

    def apply_delta(
        self, changes: LocalReplicaChanges, new_image: MetadataImage, now_ms: int
    ) -> None:
        """Act on one metadata delta: deletes, then leaders, then followers (Kafka's order)."""
        self.image = new_image
        self._apply_deletes(changes.deletes)
        self._apply_leaders(changes.leaders, now_ms)
        self._apply_followers(changes.followers, now_ms)

    def _apply_deletes(self, deletes: Collection[PartitionKey]) -> None:
        doomed = [TopicPartition(*key) for key in sorted(deletes)]
        if not doomed:
            return
        self.fetcher_manager.remove_fetcher_for_partitions(doomed)
        for topic_partition in doomed:
            self._delete_partition(topic_partition)

    def _delete_partition(self, topic_partition: TopicPartition) -> None:
        partition = self._partitions.pop(topic_partition, None)
        if partition is not None:
            partition.stop()
        self.delayed_fetches.on_partition_changed(topic_partition)
        if self.log_manager.delete_log(topic_partition):
            logger.info("deleted the log of %s", topic_partition)

    def _apply_leaders(self, leaders: Mapping[PartitionKey, PartitionInfo], now_ms: int) -> None:
        if not leaders:
            return
        keys = sorted(leaders)
        self.fetcher_manager.remove_fetcher_for_partitions([TopicPartition(*k) for k in keys])
        for key in keys:
            topic_partition, info = TopicPartition(*key), leaders[key]
            partition = self._get_or_create_partition(topic_partition, info.topic_id, now_ms)
            epoch_before = partition.leader_epoch
            partition.make_leader(LeaderAndIsr.from_registration(info.partition))
            if partition.leader_epoch != epoch_before:
                # Waiting fetches carry the old epoch: they must hear about the new one now.
                self.delayed_fetches.on_partition_changed(topic_partition)

    def _apply_followers(
        self, followers: Mapping[PartitionKey, PartitionInfo], now_ms: int
    ) -> None:
        restarted: list[TopicPartition] = []
        to_fetch: dict[TopicPartition, InitialFetchState] = {}
        for key in sorted(followers):
            topic_partition, info = TopicPartition(*key), followers[key]
            partition = self._get_or_create_partition(topic_partition, info.topic_id, now_ms)
            if not partition.make_follower(LeaderAndIsr.from_registration(info.partition)):
                continue
            self.delayed_fetches.on_partition_changed(topic_partition)
            restarted.append(topic_partition)
            if info.leader != NO_LEADER:  # without a leader there is nobody to fetch from
                to_fetch[topic_partition] = InitialFetchState(
                    topic_id=info.topic_id,
                    leader_id=info.leader,
                    leader_endpoint=self._leader_endpoint(info.leader),
                    current_leader_epoch=info.leader_epoch,
                    init_offset=partition.log_end_offset,
                )
        if restarted:
            # Kafka restarts the fetcher whenever the leader epoch moved, even for the same
            # leader: the old one may be fetching with a fenced epoch.
            self.fetcher_manager.remove_fetcher_for_partitions(restarted)
        if to_fetch:
            self.fetcher_manager.add_fetcher_for_partitions(to_fetch)

    def _leader_endpoint(self, leader_id: int) -> BrokerEndpoint | None:
        broker = self.image.cluster.broker(leader_id)
        return None if broker is None else broker.endpoint(self.inter_broker_listener_name)

    def delete_stray_logs(self, image: MetadataImage) -> list[TopicPartition]:
        """Delete local logs ``image`` does not place on this broker; call once at start-up.

        Kafka deletes such stray replicas on its first metadata publish (KAFKA-14616): logs of
        topics deleted, or of replicas moved away, while this broker was down. Without a topic
        id on disk, a topic re-created under the same name is not recognised as stray here.
        """
        stray = []
        for topic_partition in sorted(self.log_manager.logs):
            topic = image.topics.by_name.get(topic_partition.topic)
            registration = (
                None if topic is None else topic.partitions.get(topic_partition.partition)
            )
            if registration is None or self.broker_id not in registration.replicas:
                stray.append(topic_partition)
        for topic_partition in stray:
            logger.info("deleting stray replica %s: not assigned to this broker", topic_partition)
            self._delete_partition(topic_partition)
        return stray

    def _get_or_create_partition(
        self, topic_partition: TopicPartition, topic_id: str, now_ms: int
    ) -> Partition:
        partition = self._partitions.get(topic_partition)
        if partition is not None and partition.topic_id != topic_id:
            # The topic was deleted and re-created while this broker missed the delete.
            logger.info(
                "%s now belongs to topic id %s; deleting the old log", topic_partition, topic_id
            )
            self._delete_partition(topic_partition)
            partition = None
        if partition is None:
            config = self._log_config(topic_partition.topic)
            log = self.log_manager.get_or_create_log(topic_partition, now_ms, config)
            partition = Partition(topic_partition, topic_id, log, self.broker_id)
            self._partitions[topic_partition] = partition
        return partition

    def _topic_config(self, topic: str) -> Mapping[str, str]:
        return self.image.configs.config(ConfigResourceType.TOPIC, topic)

    def _log_config(self, topic: str) -> LogConfig:
        try:
            return LogConfig.from_properties(
                self._topic_config(topic), defaults=self.log_manager.default_config
            )
        except LogConfigError as error:
            # The controller validated it; a value it accepts but storage does not is logged.
            logger.warning("topic %s: %s; using the broker's log defaults", topic, error)
            return self.log_manager.default_config

    def _min_insync_replicas(self, topic: str) -> int:
        value = self._topic_config(topic).get(MIN_INSYNC_REPLICAS)
        if value is not None and value.strip().isdigit():
            return int(value)
        return self.min_insync_replicas

    # ------------------------------------------------------------------ produce

    def append_records(
        self,
        entries: Mapping[TopicPartition, bytearray | memoryview | None],
        *,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
        internal_topics_allowed: bool = False,
    ) -> dict[TopicPartition, AppendResult]:
        """Append each partition's records as leader; every partition gets a result.

        ``timeout_ms`` will bound the wait for followers once acks=-1 waits for replication.
        """
        del timeout_ms  # acks=-1 completes with the local append until replication lands
        if required_acks not in VALID_REQUIRED_ACKS:
            message = f"acks must be -1, 0 or 1, not {required_acks}"
            return {
                tp: AppendResult(error=Errors.INVALID_REQUIRED_ACKS, error_message=message)
                for tp in entries
            }
        results = {}
        for topic_partition, records in entries.items():
            results[topic_partition] = self._append_one(
                topic_partition, records, required_acks, now_ms, internal_topics_allowed
            )
        return results

    def _append_one(
        self,
        topic_partition: TopicPartition,
        records: bytearray | memoryview | None,
        required_acks: int,
        now_ms: int,
        internal_topics_allowed: bool,
    ) -> AppendResult:
        if topic_partition.topic in INTERNAL_TOPICS and not internal_topics_allowed:
            return AppendResult(
                error=Errors.INVALID_TOPIC_EXCEPTION,
                error_message=f"Cannot append to internal topic {topic_partition.topic}",
            )
        if not records:
            return AppendResult(
                error=Errors.INVALID_RECORD,
                error_message=f"the append to {topic_partition} has no record batch",
            )
        try:
            partition = self.partition_or_error(topic_partition)
            info = partition.append_records_to_leader(
                _writable(records),
                required_acks=required_acks,
                min_insync_replicas=self._min_insync_replicas(topic_partition.topic),
                now_ms=now_ms,
            )
        except PartitionError as error:
            return AppendResult(error=error.error, error_message=error.message)
        appended = 0 if info.duplicate else info.valid_bytes
        if appended:
            self.delayed_fetches.on_bytes_appended(topic_partition, appended)
        return AppendResult(
            base_offset=info.first_offset,
            log_append_time_ms=info.log_append_time_ms,
            log_start_offset=partition.log_start_offset,
            appended_bytes=appended,
        )

    # ------------------------------------------------------------------ fetch

    def read_from_log(self, params: FetchParams) -> list[LogReadResult]:
        """Read every partition in request order (Kafka's ``readFromLog`` size rules)."""
        results = []
        bytes_left = params.max_bytes
        min_one_batch = True  # Fetch v3+: hardMaxBytesLimit is false
        for fetch in params.partitions:
            result = self._read_one(
                params, fetch, min(fetch.partition_max_bytes, bytes_left), min_one_batch
            )
            if result.size_in_bytes > 0:
                min_one_batch = False
            bytes_left = max(0, bytes_left - result.size_in_bytes)
            results.append(result)
        return results

    def _read_one(
        self, params: FetchParams, fetch: PartitionFetch, max_bytes: int, min_one_batch: bool
    ) -> LogReadResult:
        try:
            partition = self.partition_or_error(fetch.topic_partition)
            info = partition.fetch_records(
                replica_id=params.replica_id,
                fetch_offset=fetch.fetch_offset,
                max_bytes=max(0, max_bytes),
                isolation=params.isolation,
                min_one_batch=min_one_batch,
                current_leader_epoch=fetch.current_leader_epoch,
                last_fetched_epoch=fetch.last_fetched_epoch,
            )
        except PartitionError as error:
            return LogReadResult(
                topic_partition=fetch.topic_partition,
                error=error.error,
                error_message=error.message,
            )
        return LogReadResult.of(fetch.topic_partition, info)

    async def fetch_messages(self, params: FetchParams) -> list[LogReadResult]:
        """Read now, or wait for ``min_bytes`` / ``max_wait_ms`` and read again."""
        results = self.read_from_log(params)
        if _respond_now(params, results):
            return results
        completion = await self.delayed_fetches.wait(
            [fetch.topic_partition for fetch in params.partitions],
            min_bytes=params.min_bytes,
            accumulated_bytes=sum(result.size_in_bytes for result in results),
            max_wait_ms=params.max_wait_ms,
        )
        if completion is FetchCompletion.PURGATORY_FULL:
            return results
        return self.read_from_log(params)

    # ------------------------------------------------------------------ list offsets

    def fetch_offset_for_timestamp(
        self,
        topic_partition: TopicPartition,
        timestamp: int,
        *,
        isolation: FetchIsolation | None,
        current_leader_epoch: int,
        fetch_only_from_leader: bool,
    ) -> OffsetAndTimestamp | None:
        """ListOffsets for one partition; raises ``PartitionError``."""
        return self.partition_or_error(topic_partition).fetch_offset_for_timestamp(
            timestamp,
            isolation=isolation,
            current_leader_epoch=current_leader_epoch,
            fetch_only_from_leader=fetch_only_from_leader,
        )


def _respond_now(params: FetchParams, results: Sequence[LogReadResult]) -> bool:
    """Kafka's ``fetchMessages`` conditions for answering without waiting."""
    return (
        params.max_wait_ms <= 0
        or not params.partitions
        or sum(result.size_in_bytes for result in results) >= params.min_bytes
        or any(result.error is not Errors.NONE for result in results)
        or any(result.diverging_epoch is not None for result in results)
    )


def _writable(records: bytearray | memoryview) -> bytearray | memoryview:
    """The append stamps offsets in place; a read-only buffer is copied first."""
    if isinstance(records, memoryview) and records.readonly:
        return bytearray(records)
    return records
