"""The leader side of the replication sim: the shipped Kafka handlers answer, and AlterPartition.

Fetch runs the shipped ``broker.handlers.fetch.handle_fetch`` on the leader broker, as a
``SimTask``: ``ReplicaManager.fetch_messages`` (follower progress, ISR expansion, the high
watermark; a fetch with nothing to send waits in the delayed-fetch purgatory up to its
``max_wait_ms`` and is woken by an append — Kafka's ``DelayedFetch``) and the handler's answer
building. Its answer travels back when the handler returns. The request handed to it is the
``FetchRequest`` that ``protocol.fetch.decode_fetch_request`` makes of the follower's request,
and the answer's record slices are joined into the bytes the follower reads off the wire: the
hot path skips only the byte codecs.

OffsetsForLeaderEpoch and ListOffsets (rare: the KIP-101 path and out-of-range resets) go
through the bytes as well: the follower's request encoders (``fetcher.leader_codecs``), the
broker's ``protocol.apis`` decode and encode around the shipped handler functions
(``broker.handlers.offsets_for_leader_epoch``, ``broker.handlers.list_offsets``), then the
follower's decoders.

A broker that has not published its metadata yet answers NOT_LEADER_OR_FOLLOWER (Kafka holds
the request until then; the follower backs off either way).

``SimDelayedFetches`` is the shipped ``broker.purgatory.DelayedFetches`` on simulated time: its
wake-ups over its ``FetchPurgatory`` are inherited, and so are its deadlines, which expire in
``ReplicaManager.tick`` on the broker's one timer (``SimTimer``); a ``SimFuture`` per waiter
replaces the asyncio future. A waiter is resumed by an event of its own, as asyncio's
``call_soon`` resumes it after the appending code has returned.

``SimAlterPartitionManager`` is the transport of the shipped ``replica.alter_partition_queue``
on the simulated network (what ``broker.alter_partition.AlterPartitionManager`` does with
asyncio and HTTP): a lost answer times out, a failure retries after 50 ms.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, cast

import attrs

from pykraft.broker.controller_api import ControllerClient
from pykraft.broker.handlers.fetch import handle_fetch
from pykraft.broker.handlers.list_offsets import list_offsets
from pykraft.broker.handlers.offsets_for_leader_epoch import offsets_for_leader_epoch
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.purgatory import DelayedFetches
from pykraft.fetcher.leader_codecs import (
    ReplicaFetch,
    decode_list_offsets_response,
    decode_offset_for_leader_epoch_response,
    encode_list_offsets_request,
    encode_offset_for_leader_epoch_request,
)
from pykraft.fetcher.responses import LeaderOffsets
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    FetchRequest,
    FetchTopic,
    PartitionData,
    ReplicaState,
)
from pykraft.protocol.segments import Segment
from pykraft.quorum.controller import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerState,
)
from pykraft.quorum.controller import AlterPartitionResult as ControllerAlterPartitionResult
from pykraft.replica.alter_partition_queue import (
    ALTER_PARTITION_RETRY_BACKOFF_MS,
    AlterPartitionCallback,
    AlterPartitionItem,
    AlterPartitionQueue,
    AlterPartitionRequestBatch,
)
from pykraft.replica.fetch_waiters import FetchCompletion
from pykraft.replica.isr import AlterPartitionResult
from pykraft.replica.partition_state import FetchIsolation
from pykraft.storage.log_reader import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_log import records
from tests.sim.replication_net import SimFuture, SimTask

if TYPE_CHECKING:
    from tests.sim.replication_broker import SimBroker

LeaderRecords = tuple[tuple[int, int, str], ...]
# The sim's brokers register no endpoints: the handlers' KIP-951 hints name none.
LISTENER_NAME = "PLAINTEXT"


@attrs.frozen
class FetchAnswer:
    data: PartitionData
    # The leader's records when it answered a diverging epoch (for the prefix check).
    leader_records: LeaderRecords | None = None


@attrs.frozen
class EpochAnswer:
    data: LeaderEpochEndOffset
    leader_records: LeaderRecords


def services(broker: SimBroker) -> BrokerServices:
    """What the composition root hands the handlers; these three never call the controller."""
    return BrokerServices(
        broker_id=broker.broker_id,
        cluster_id="sim",
        replica_manager=broker.replica_manager,
        metadata=lambda: broker.replica_manager.image,
        controller=cast(ControllerClient, None),
        # The simulation has one clock: record timestamps are simulated time too.
        wall_clock_ms=lambda: broker.env.now_ms,
    )


def _records(broker: SimBroker, topic_partition: TopicPartition) -> LeaderRecords:
    partition = broker.replica_manager.get_partition(topic_partition)
    return () if partition is None else tuple(records(partition.log))


# ---------------------------------------------------------------------------- Fetch


def fetch_request(replica_id: int, replica_epoch: int, request: ReplicaFetch) -> FetchRequest:
    """What ``decode_fetch_request`` makes of the follower's ``encode_fetch_request`` (by
    topic name: the sim's fetchers speak v11/v12, with the ReplicaState of v15+)."""
    topics: dict[str, list[FetchTopic]] = {}
    for target in request.targets:
        topics.setdefault(target.topic_partition.topic, []).append(
            FetchTopic((target.partition,), topic=target.topic_partition.topic)
        )
    return FetchRequest(
        replica_id=replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        topics=tuple(
            FetchTopic(tuple(p for t in group for p in t.partitions), topic=name)
            for name, group in topics.items()
        ),
        replica_state=ReplicaState(replica_id, replica_epoch),
    )


def answer_fetch(
    leader: SimBroker, replica_id: int, replica_epoch: int, request: ReplicaFetch, api_version: int
) -> SimFuture:
    """The shipped Fetch handler on ``leader``; resolves with each partition's answer."""
    if not leader.serving:
        refused = SimFuture()
        refused.resolve(
            {
                target.topic_partition: FetchAnswer(
                    PartitionData(
                        target.partition.partition, error_code=Errors.NOT_LEADER_OR_FOLLOWER
                    )
                )
                for target in request.targets
            }
        )
        return refused
    return SimTask(
        leader,
        "Fetch",
        functools.partial(_fetch, leader, replica_id, replica_epoch, request, api_version),
    ).result


async def _fetch(
    leader: SimBroker, replica_id: int, replica_epoch: int, request: ReplicaFetch, api_version: int
) -> dict[TopicPartition, FetchAnswer]:
    response = await handle_fetch(
        services(leader),
        fetch_request(replica_id, replica_epoch, request),
        api_version,
        LISTENER_NAME,
    )
    answers = {}
    for topic in response.responses:
        for data in topic.partitions:
            topic_partition = TopicPartition(topic.topic, data.partition_index)
            wire = b"".join(_buffer(piece) for piece in data.records or ())
            answer = attrs.evolve(data, records=(wire,) if wire else ())
            diverged = data.diverging_epoch != NO_DIVERGING_EPOCH
            answers[topic_partition] = FetchAnswer(
                answer, _records(leader, topic_partition) if diverged else None
            )
    return answers


def _buffer(piece: Segment) -> bytes:
    """A memory store's slices are buffers (``MemorySlice``), never file ranges."""
    assert isinstance(piece, bytes | bytearray | memoryview), f"{piece!r} is not in memory"
    return bytes(piece)


class SimDelayedFetches(DelayedFetches):
    """``DelayedFetches`` on simulated time: its own wake-ups (bytes appended, high watermark
    moved, partition changed) over its ``FetchPurgatory``, the deadlines of ``ReplicaManager``'s
    one timer, and ``SimFuture``s for its asyncio futures."""

    def __init__(self, broker: SimBroker) -> None:
        super().__init__(monotonic_ms=lambda: broker.env.now_ms)
        self.broker = broker
        self._waiting: dict[int, SimFuture] = {}

    async def wait(
        self,
        partitions: Collection[TopicPartition],
        *,
        min_bytes: int,
        accumulated_bytes: int,
        max_wait_ms: int,
        isolation: FetchIsolation = FetchIsolation.LOG_END,
    ) -> FetchCompletion:
        delay_ms = max(0, max_wait_ms)
        waiter_id = self.purgatory.try_watch(
            partitions,
            min_bytes=min_bytes,
            accumulated_bytes=accumulated_bytes,
            deadline_ms=self.broker.env.now_ms + delay_ms,
            isolation=isolation,
        )
        if waiter_id is None:
            return FetchCompletion.PURGATORY_FULL
        future = self._waiting[waiter_id] = SimFuture()
        self._schedule()  # ReplicaManager's timer, at its core's next deadline
        try:
            return cast(FetchCompletion, await future)
        finally:
            self._waiting.pop(waiter_id, None)
            self.purgatory.remove(waiter_id)

    def close(self) -> None:
        for waiter_id in list(self._waiting):
            self.purgatory.remove(waiter_id)
        self._resolve(list(self._waiting), FetchCompletion.DEADLINE)

    def _resolve(self, waiter_ids: list[int], completion: FetchCompletion) -> None:
        for waiter_id in waiter_ids:
            future = self._waiting.pop(waiter_id, None)
            if future is not None:
                self.broker.env.checker.stats[f"delayed fetches ({completion.name})"] += 1
                self.broker.schedule(
                    0, "delayed fetch completes", functools.partial(future.resolve, completion)
                )


# ---------------------------------------------------------------------------- the other two


def answer_epoch_end_offsets(
    leader: SimBroker,
    replica_id: int,
    requests: Mapping[TopicPartition, LeaderEpochRequest],
    api_version: int,
) -> dict[TopicPartition, EpochAnswer]:
    """The shipped OffsetsForLeaderEpoch handler, through the bytes."""
    if not leader.serving:
        return {
            tp: EpochAnswer(LeaderEpochEndOffset(Errors.NOT_LEADER_OR_FOLLOWER), ())
            for tp in requests
        }
    key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    body = encode_offset_for_leader_epoch_request(requests, api_version, replica_id)
    response = offsets_for_leader_epoch(services(leader), decode_request(key, api_version, body))
    answers = decode_offset_for_leader_epoch_response(
        encode_response(key, api_version, response), api_version, requests
    )
    return {tp: EpochAnswer(answer, _records(leader, tp)) for tp, answer in answers.items()}


def answer_leader_offsets(
    leader: SimBroker,
    replica_id: int,
    topic_partition: TopicPartition,
    current_leader_epoch: int,
    api_version: int,
) -> LeaderOffsets:
    """ListOffsets latest then earliest from a replica (``KafkaLeaderEndpoint``), through the
    shipped handler and the bytes."""
    if not leader.serving:
        return LeaderOffsets(Errors.NOT_LEADER_OR_FOLLOWER)
    key = ApiKey.LIST_OFFSETS
    offsets = []
    for timestamp in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
        body = encode_list_offsets_request(
            topic_partition, current_leader_epoch, timestamp, api_version, replica_id
        )
        response = list_offsets(services(leader), decode_request(key, api_version, body))
        error, offset = decode_list_offsets_response(
            encode_response(key, api_version, response), api_version, topic_partition
        )
        if error != Errors.NONE:
            return LeaderOffsets(error)
        offsets.append(offset)
    return LeaderOffsets(Errors.NONE, log_start_offset=offsets[1], log_end_offset=offsets[0])


# ---------------------------------------------------------------------------- AlterPartition


def _request_data(item: AlterPartitionItem) -> AlterPartitionData:
    change = item.change
    return AlterPartitionData(
        item.topic_id,
        item.partition_index,
        change.leader_epoch,
        change.partition_epoch,
        tuple(BrokerState(m.broker_id, m.broker_epoch) for m in change.new_isr),
    )


def _result(raw: ControllerAlterPartitionResult) -> AlterPartitionResult:
    """What ``broker.alter_partition.parse_result`` makes of the controller's answer."""
    return AlterPartitionResult(
        error=Errors[raw.error.error.name],
        leader_id=raw.leader_id,
        leader_epoch=raw.leader_epoch,
        isr=raw.isr,
        partition_epoch=raw.partition_epoch,
    )


class SimAlterPartitionManager:
    """The transport of the shipped ``AlterPartitionQueue`` on simulated time: the request goes
    through the simulated network to the controller, a lost answer times out, a failure retries
    after ``ALTER_PARTITION_RETRY_BACKOFF_MS`` (what ``AlterPartitionManager`` does with asyncio
    and HTTP)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self.queue = AlterPartitionQueue()

    @property
    def idle(self) -> bool:
        return self.queue.idle

    def submit(self, item: AlterPartitionItem, callback: AlterPartitionCallback) -> None:
        if not self.queue.submit(item, callback):
            callback(AlterPartitionResult(error=Errors.OPERATION_NOT_ATTEMPTED))
            return
        self._maybe_send()

    def _maybe_send(self) -> None:
        batch = self.queue.next_request()
        if batch is None:
            return
        request = AlterPartitionRequest(
            self.broker.broker_id,
            self.broker.broker_epoch,
            tuple(_request_data(item) for item in batch.items),
        )
        self.broker.call_controller(
            "AlterPartition", request, lambda answer: self._on_answer(batch, answer)
        )
        self.broker.schedule(
            self.broker.env.settings.request_timeout_ms,
            "AlterPartition timeout",
            lambda: self._on_answer(batch, None),
        )

    def _on_answer(
        self, batch: AlterPartitionRequestBatch, answer: AlterPartitionResponse | None
    ) -> None:
        if batch.number != self.queue.in_flight:
            return
        if answer is None or answer.error.is_failure():
            self.queue.on_answer(batch, None)
            self.broker.schedule(
                ALTER_PARTITION_RETRY_BACKOFF_MS, "AlterPartition retry", self._maybe_send
            )
            return
        results = {(r.topic_id, r.partition_index): _result(r) for r in answer.partitions}
        for callback, result in self.queue.on_answer(batch, results):
            callback(result)
        self._maybe_send()
