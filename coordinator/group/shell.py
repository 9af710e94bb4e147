"""The asyncio shell around the pure group coordinator: futures, the timer, appends, loading.

Theory of operation
-------------------
Requests: each call picks a request id, parks a future under it, and hands the request to the
pure ``GroupCoordinator`` with the wall clock's ``now_ms``. The ``Effects`` that come back are
applied at once: answers resolve their futures (maybe this request's, maybe other members'
parked JoinGroups), appends start, and the one timer is moved to ``next_deadline_ms``. When the
timer fires, ``poll`` runs and its effects are applied the same way.

Appends: each ``Append`` becomes one RecordBatch v2 appended to its ``__consumer_offsets``
partition with acks=-1 by ``coordinator.group.writer`` (a TxnOffsetCommit's as its producer's
transactional batch, KIP-98); the outcome goes back to the core with ``on_append_done``.
Appends start in the order the core asked for them (tasks start FIFO and the local append
happens before the task's first ``await``).

Transactions: the WriteTxnMarkers handler calls ``complete_transaction`` once a COMMIT or ABORT
marker is appended to a ``__consumer_offsets`` partition; the core settles the producer's pending
offsets there (Kafka's ``GroupCoordinator.onTransactionCompleted``). It is synchronous: nothing
is written, and a partition still loading needs no call (``loader`` reads its log to the end,
markers included, before the groups are installed).

Leadership (``on_metadata``, called after ``ReplicaManager.apply_delta``): a partition of
``__consumer_offsets`` this broker was elected to lead is loaded (its log replayed by
``coordinator.group.loader``); one it stopped leading or no longer hosts is unloaded, and waiting
members are told NOT_COORDINATOR so they find the new coordinator.

Shutdown answers whatever still waits (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE) and stops
the shell's tasks.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from pykraft.coordinator.group.classic_apis import CONSUMER_PROTOCOL_OFFSET_COMMIT_VERSION
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_heartbeat import (
    ConsumerGroupConfig,
    ConsumerGroupHeartbeatRequest,
)
from pykraft.coordinator.group.consumer_records import TopicMetadata
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.effects import (
    Append,
    ConsumerGroupHeartbeatResult,
    Effects,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    OffsetCommitResult,
    Result,
    SyncGroupResult,
    TransactionalProducer,
)
from pykraft.coordinator.group.loader import LoadError, read_partition_records
from pykraft.coordinator.group.manager import OwnedPartition, PartitionStatus
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC, FetchedOffset, OffsetsReplay
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.replicas import Replicas
from pykraft.coordinator.group.unified import UnifiedGroupCoordinator
from pykraft.coordinator.group.views import GroupOverview, GroupSummary
from pykraft.coordinator.group.writer import OFFSET_COMMIT_TIMEOUT_MS, OffsetsWriter
from pykraft.coordinator.shell_runtime import ShellRuntime
from pykraft.metadata.image import MetadataImage, TopicsImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.protocol.errors import Errors
from pykraft.storage.deadline_timer import DeadlineTimer
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

MAX_LOGGED_PROBLEMS = 5


def random_member_suffix() -> str:
    return str(uuid.uuid4())


class GroupCoordinatorShell:
    def __init__(
        self,
        replica_manager: Replicas,
        config: GroupConfig,
        *,
        wall_clock_ms: Callable[[], int],
        member_suffix: Callable[[], str] = random_member_suffix,
        offset_commit_timeout_ms: int = OFFSET_COMMIT_TIMEOUT_MS,
        consumer_config: ConsumerGroupConfig | None = None,
    ) -> None:
        self.replica_manager = replica_manager
        self.config = config
        # Classic and KIP-848 consumer groups side by side (coordinator.group.unified).
        self.core = UnifiedGroupCoordinator(config, member_suffix, consumer_config)
        # Kafka's ``time.milliseconds()``: commit timestamps are wall time, so deadlines are too.
        self.wall_clock_ms = wall_clock_ms
        self.writer = OffsetsWriter(
            replica_manager, wall_clock_ms=wall_clock_ms, timeout_ms=offset_commit_timeout_ms
        )
        self._runtime: ShellRuntime[Result] = ShellRuntime(logger)
        self._timer = DeadlineTimer(lambda: self.wall_clock_ms(), self._on_timer)
        self._topics_seen: TopicsImage | None = None

    # ------------------------------------------------------------------ requests

    async def join_group(self, request: JoinGroupRequest) -> JoinGroupResult:
        fallback = JoinGroupResult(member_id=request.member_id, error=Errors.NOT_COORDINATOR)
        result = await self._call(
            lambda rid, now: self.core.handle_join_group(request, rid, now), fallback
        )
        assert isinstance(result, JoinGroupResult)
        return result

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        group_instance_id: str | None = None,
    ) -> SyncGroupResult:
        result = await self._call(
            lambda rid, now: self.core.handle_sync_group(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=assignments,
                request_id=rid,
                now_ms=now,
                group_instance_id=group_instance_id,
            ),
            SyncGroupResult(error=Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, SyncGroupResult)
        return result

    async def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> Errors:
        result = await self._call(
            lambda rid, now: self.core.handle_heartbeat(
                group_id, member_id, generation_id, rid, now, group_instance_id
            ),
            HeartbeatResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, HeartbeatResult)
        return result.error

    async def leave_group(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> LeaveGroupResult:
        leaving = tuple(members)
        result = await self._call(
            lambda rid, now: self.core.handle_leave_group(group_id, leaving, rid, now),
            LeaveGroupResult(Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, LeaveGroupResult)
        return result

    async def commit_offsets(
        self,
        *,
        group_id: str,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        group_instance_id: str | None = None,
        api_version: int = CONSUMER_PROTOCOL_OFFSET_COMMIT_VERSION,
    ) -> Mapping[TopicPartition, Errors]:
        result = await self._call(
            lambda rid, now: self.core.handle_commit_offsets(
                group_id=group_id,
                member_id=member_id,
                generation_id=generation_id,
                offsets=offsets,
                request_id=rid,
                now_ms=now,
                group_instance_id=group_instance_id,
                api_version=api_version,
            ),
            OffsetCommitResult({tp: Errors.NOT_COORDINATOR for tp in offsets}),
        )
        assert isinstance(result, OffsetCommitResult)
        return result.errors

    async def txn_offset_commit(
        self,
        *,
        group_id: str,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, Errors]:
        """TxnOffsetCommit (KIP-98; member checks of v3+, KIP-447): the offsets are written as
        the producer's transactional batch and wait for its marker (``complete_transaction``).
        ``transactional_id`` names the transaction in the logs; KIP-890's verification of the
        partition's membership in it is the replica layer's, not done here yet."""
        producer = TransactionalProducer(producer_id, producer_epoch)
        logger.debug(
            "TxnOffsetCommit of %s (producer %d, epoch %d) for group %s: %d partitions",
            transactional_id,
            producer_id,
            producer_epoch,
            group_id,
            len(offsets),
        )
        result = await self._call(
            lambda rid, now: self.core.handle_txn_commit_offsets(
                group_id=group_id,
                producer=producer,
                member_id=member_id,
                generation_id=generation_id,
                group_instance_id=group_instance_id,
                offsets=offsets,
                request_id=rid,
                now_ms=now,
            ),
            OffsetCommitResult({tp: Errors.NOT_COORDINATOR for tp in offsets}),
        )
        assert isinstance(result, OffsetCommitResult)
        return dict(result.errors)

    async def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResult:
        """ConsumerGroupHeartbeat (KIP-848); answered once its records are appended."""
        result = await self._call(
            lambda rid, now: self.core.handle_consumer_group_heartbeat(request, rid, now),
            ConsumerGroupHeartbeatResult(error=Errors.NOT_COORDINATOR),
        )
        assert isinstance(result, ConsumerGroupHeartbeatResult)
        return result

    def describe_consumer_group(self, group_id: str) -> tuple[Errors, ConsumerGroup | None]:
        return self.core.describe_consumer_group(group_id)

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        """The COMMIT (``commit``) or ABORT marker of ``producer_id`` is appended to partition
        ``offsets_partition`` of ``__consumer_offsets``: settle its pending offsets there."""
        settled = self.core.complete_transaction(offsets_partition, producer_id, commit)
        if settled:
            logger.debug(
                "%s of producer %d settled the offsets of %s",
                "COMMIT" if commit else "ABORT",
                producer_id,
                ", ".join(settled),
            )

    def delete_groups(self, group_ids: Iterable[str]) -> dict[str, Errors]:
        """DeleteGroups: each group's error; the tombstones are appended in the background."""
        results, effects = self.core.handle_delete_groups(group_ids, self.wall_clock_ms())
        self._apply(effects)
        return results

    def delete_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition]
    ) -> tuple[Errors, dict[TopicPartition, Errors]]:
        """OffsetDelete: the group's error, else each partition's (empty on a group error)."""
        error, errors, effects = self.core.handle_delete_offsets(
            group_id, partitions, self.wall_clock_ms()
        )
        self._apply(effects)
        return error, errors

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        *,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[Errors, list[FetchedOffset]]:
        return self.core.fetch_offsets(
            group_id, partitions, require_stable, member_id=member_id, member_epoch=member_epoch
        )

    def describe_group(self, group_id: str) -> tuple[Errors, GroupSummary]:
        return self.core.describe_group(group_id)

    def list_groups(self, states: frozenset[str]) -> tuple[Errors, list[GroupOverview]]:
        return self.core.list_groups(states)

    def partition_for(self, group_id: str) -> int:
        return self.core.partition_for(group_id)

    async def _call(self, handle: Callable[[int, int], Effects], fallback: Result) -> Result:
        return await self._runtime.call(
            lambda request_id: self._apply(handle(request_id, self.wall_clock_ms())), fallback
        )

    # ------------------------------------------------------------------ effects

    def _apply(self, effects: Effects) -> None:
        for answer in effects.answers:
            self._runtime.answer(answer.request_id, answer.result)
        for append in effects.appends:
            self._runtime.spawn(
                self._append(append), f"append to {OFFSETS_TOPIC}-{append.partition}"
            )
        self._reschedule()

    async def _append(self, append: Append) -> None:
        error, base_offset = await self.writer.append(append)
        self._apply(
            self.core.on_append_done(append.write_id, error, base_offset, self.wall_clock_ms())
        )

    def _reschedule(self) -> None:
        self._timer.arm(self.core.next_deadline_ms())

    def _on_timer(self) -> None:
        self._timer.fired()
        self.poll()

    def poll(self) -> None:
        """Act on every deadline passed by now (the timer calls it; so may a simulated clock)."""
        self._apply(self.core.poll(self.wall_clock_ms()))

    # ------------------------------------------------------------------ leadership

    def on_metadata(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        """React to this broker's new leaderships of ``__consumer_offsets`` partitions."""
        topic = image.topics.by_name.get(OFFSETS_TOPIC)
        if topic is not None and topic.partitions and not self.core.partitions:
            # Kafka reads the partition count of an existing topic, not the config.
            self.core.num_partitions = len(topic.partitions)
        if image.topics is not self._topics_seen:
            # Consumer groups match subscriptions (and regexes) against these (KIP-848).
            self._topics_seen = image.topics
            self.core.update_topics(
                {
                    name: TopicMetadata(t.topic_id, name, len(t.partitions))
                    for name, t in image.topics.by_name.items()
                }
            )
        now_ms = self.wall_clock_ms()
        gone = [key for key in changes.deletes if key.topic == OFFSETS_TOPIC]
        gone += [key for key in changes.followers if key.topic == OFFSETS_TOPIC]
        for key in sorted(gone):
            if key.partition in self.core.partitions:
                logger.info("no longer the group coordinator of %s", key)
                self._apply(self.core.unload(key.partition, now_ms))
        for key, info in sorted(changes.elected_leaders.items()):
            if key.topic != OFFSETS_TOPIC:
                continue
            needed, effects = self.core.begin_loading(key.partition, info.leader_epoch, now_ms)
            self._apply(effects)
            if needed:
                name = f"load {OFFSETS_TOPIC}-{key.partition}"
                self._runtime.spawn(self._load(key.partition, info.leader_epoch), name)

    async def _load(self, partition: int, epoch: int) -> None:
        topic_partition = TopicPartition(OFFSETS_TOPIC, partition)
        hosted = self.replica_manager.get_partition(topic_partition)
        if hosted is None or not hosted.is_leader or hosted.leader_epoch != epoch:
            logger.info("%s is not led here in epoch %d: not loading it", topic_partition, epoch)
            self._abort_load(partition, epoch)
            return
        started_ms = self.wall_clock_ms()
        replay = OffsetsReplay()
        try:
            await read_partition_records(hosted.log, replay.replay)
        except LoadError as error:
            logger.error("cannot load the groups of %s: %s", topic_partition, error)
            self._abort_load(partition, epoch)
            return
        now_ms = self.wall_clock_ms()
        loaded = replay.loaded(now_ms)
        effects, problems = self.core.complete_loading(partition, epoch, loaded, now_ms)
        for problem in problems[:MAX_LOGGED_PROBLEMS]:
            logger.warning("%s: skipped a %s", topic_partition, problem)
        logger.info(
            "loaded %s (epoch %d): %d records in %d ms",
            topic_partition,
            epoch,
            replay.records,
            self.wall_clock_ms() - started_ms,
        )
        self._apply(effects)

    def _abort_load(self, partition: int, epoch: int) -> None:
        """Give the partition up (clients get NOT_COORDINATOR) unless it moved on already."""
        if self.core.partitions.get(partition) == OwnedPartition(PartitionStatus.LOADING, epoch):
            self._apply(self.core.unload(partition, self.wall_clock_ms()))

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self) -> None:
        self._timer.cancel()
        effects = self.core.shutdown(self.wall_clock_ms())
        for answer in effects.answers:
            self._runtime.answer(answer.request_id, answer.result)
        await self._runtime.stop()
