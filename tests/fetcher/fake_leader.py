"""An in-memory ``LeaderEndpoint`` for the asyncio fetcher tests (no sockets, no sleeps; time is
``tests.fake_clock.FakeClock``).

``FakeLeaderEndpoint`` answers each request through ``tests.fetcher.harness.MockLeader`` — the
mock that encodes Kafka's leader rules (current-leader-epoch checks, KIP-320 diverging epochs,
OffsetsForLeaderEpoch from the epoch cache, ListOffsets) — one ``MockLeader`` per partition.
Followers replicate into real ``PartitionLog``s in ``tmp_path``; ``records_of`` reads a log back
from its segment files as ``(offset, epoch)`` pairs, the harness's record shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import attrs

from pykraft.fetcher.leader_codecs import LeaderFeatures
from pykraft.fetcher.leader_endpoint import LeaderEndpointError, ReplicaFetch
from pykraft.fetcher.responses import LeaderOffsets
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock
from tests.fetcher.harness import MockLeader, MockLog, Rec

# Kafka 3.7 against Kafka 3.7: DivergingEpoch, topic ids, ReplicaState.
MODERN = LeaderFeatures(fetch_version=16, list_offsets_version=8, offset_for_leader_epoch_version=4)
# A leader before KIP-320's DivergingEpoch (Fetch v11): truncation goes through
# OffsetsForLeaderEpoch first.
PRE_KIP_320 = LeaderFeatures(
    fetch_version=11, list_offsets_version=5, offset_for_leader_epoch_version=3
)
CONFIG = LogConfig(segment_bytes=4096)


@dataclass
class FakeLeaderEndpoint:
    """A leader broker holding one ``MockLeader`` per partition it leads."""

    leader_id: int
    leaders: dict[TopicPartition, MockLeader]
    leader_features: LeaderFeatures = MODERN
    host: str = "127.0.0.1"
    port: int = 9092
    # Requests that fail as a whole (LeaderEndpointError) before the endpoint behaves.
    failures: int = 0
    # Called inside fetch, before answering: lets a test change the fetcher mid-request.
    during_fetch: Callable[[], None] | None = None
    # With a clock, a fetch with nothing to return waits max_wait_ms like a real leader.
    clock: FakeClock | None = None
    closed: bool = False
    requests: list[str] = field(default_factory=list)
    fetched: list[ReplicaFetch] = field(default_factory=list)

    def _maybe_fail(self, name: str) -> None:
        self.requests.append(name)
        if self.failures:
            self.failures -= 1
            raise LeaderEndpointError(f"{name}: connection refused (fake)")

    async def features(self) -> LeaderFeatures:
        self._maybe_fail("ApiVersions")
        return self.leader_features

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        self._maybe_fail("Fetch")
        self.fetched.append(request)
        if self.during_fetch is not None:
            self.during_fetch()
        answers = self._answer(request)
        if self.clock is not None and not any(a.records or a.error_code for a in answers.values()):
            await self.clock.wait(asyncio.Event(), request.max_wait_ms)
        return answers

    def _answer(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        answers = {}
        for target in request.targets:
            leader = self.leaders.get(target.topic_partition)
            index = target.topic_partition.partition
            if leader is None:
                answers[target.topic_partition] = PartitionData(
                    index, error_code=Errors.NOT_LEADER_OR_FOLLOWER
                )
                continue
            answer = leader.fetch(target.partition)
            answers[target.topic_partition] = attrs.evolve(answer, partition_index=index)
        return answers

    async def fetch_epoch_end_offsets(
        self, requests: Mapping[TopicPartition, LeaderEpochRequest]
    ) -> dict[TopicPartition, LeaderEpochEndOffset]:
        self._maybe_fail("OffsetForLeaderEpoch")
        return {
            tp: self.leaders[tp].offset_for_leader_epoch(request)
            if tp in self.leaders
            else LeaderEpochEndOffset(Errors.NOT_LEADER_OR_FOLLOWER)
            for tp, request in requests.items()
        }

    async def fetch_leader_offsets(
        self, topic_partition: TopicPartition, current_leader_epoch: int
    ) -> LeaderOffsets:
        self._maybe_fail("ListOffsets")
        leader = self.leaders.get(topic_partition)
        if leader is None:
            return LeaderOffsets(Errors.NOT_LEADER_OR_FOLLOWER)
        return leader.list_offsets(current_leader_epoch)

    async def close(self) -> None:
        self.closed = True


def leader_of(epochs: Sequence[int], leader_epoch: int, hw: int, **options: object) -> MockLeader:
    """A mock leader log with one record per entry of ``epochs``, elected in ``leader_epoch``."""
    log = MockLog.of(epochs, high_watermark=hw)
    log.become_leader(leader_epoch)
    return MockLeader(log, leader_epoch, **options)  # type: ignore[arg-type]


def batch(offset: int, epoch: int) -> bytes:
    """The record batch the harness's leader sends for ``(offset, epoch)``."""
    record = SimpleRecord(value=f"{offset}@{epoch}".encode())
    return build_batch([record], base_offset=offset, partition_leader_epoch=epoch)


def open_log(directory: Path, epochs: Sequence[int] = (), high_watermark: int = 0) -> PartitionLog:
    """A real follower log holding one replicated record per entry of ``epochs``."""
    log = PartitionLog.open(directory, CONFIG)
    for offset, epoch in enumerate(epochs):
        log.append_as_follower(batch(offset, epoch))
    log.update_high_watermark(high_watermark)
    return log


def records_of(log: PartitionLog) -> list[Rec]:
    """The log's records as ``(offset, epoch)``, read back from its segment files."""
    info = log.read(log.log_start_offset, 1 << 30, log.log_end_offset)
    out: list[Rec] = []
    for piece in info.slices:
        data = piece.read_bytes()
        for _, header in iter_batches(data):
            epoch = header.partition_leader_epoch
            out.extend((offset, epoch) for offset in range(header.base_offset, header.next_offset))
    return out


class FailingLog:
    """A real log whose writes fail like a dead disk once ``failing`` names them."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.failing: frozenset[str] = frozenset()

    def __getattr__(self, name: str) -> object:
        if name in self.failing:
            raise OSError(5, f"Input/output error ({name}, fake)")
        return getattr(self.log, name)
