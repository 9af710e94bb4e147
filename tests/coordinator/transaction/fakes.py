"""Doubles for the transaction coordinator shell's I/O edges: the replica layer (a real
``PartitionLog`` per ``__transaction_state`` partition, on a ``MemoryDisk``, shared by every
broker as if replicated), the marker channel, and the producer id source."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

import attrs

from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.coordinator.transaction.loader import load_transactions
from pykraft.coordinator.transaction.replay import TransactionLogReplay
from pykraft.protocol.errors import Errors
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker


@attrs.frozen
class Outcome:
    error: Errors
    base_offset: int


@attrs.define
class Hosted:
    is_leader: bool
    leader_epoch: int
    log: PartitionLog


class SharedLogs:
    """The ``__transaction_state`` partitions, one log each, as every replica holds them."""

    def __init__(self) -> None:
        self.logs: dict[int, PartitionLog] = {}

    def log(self, partition: int) -> PartitionLog:
        if partition not in self.logs:
            disk = MemoryDisk(Path(f"memory/{TRANSACTION_STATE_TOPIC}-{partition}"))
            self.logs[partition] = PartitionLog.open(disk, LogConfig())
        return self.logs[partition]


class FakeReplicas:
    """One broker's view: which partitions it leads in which epoch; appends go to the shared
    logs (or fail with ``fail_with``, or wait while ``gate`` is clear)."""

    def __init__(self, logs: SharedLogs) -> None:
        self.logs = logs
        self.leader_epochs: dict[int, int] = {}
        self.fail_with: Errors | None = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.appends = 0

    def lead(self, partition: int, epoch: int) -> None:
        self.leader_epochs[partition] = epoch

    def get_partition(self, topic_partition: TopicPartition) -> Hosted | None:
        epoch = self.leader_epochs.get(topic_partition.partition)
        if topic_partition.topic != TRANSACTION_STATE_TOPIC or epoch is None:
            return None
        return Hosted(True, epoch, self.logs.log(topic_partition.partition))

    async def append_records(
        self,
        entries: Mapping[TopicPartition, bytearray],
        *,
        required_acks: int,
        timeout_ms: int,
        now_ms: int,
        internal_topics_allowed: bool = False,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> Mapping[TopicPartition, Outcome]:
        assert required_acks == -1 and internal_topics_allowed
        await self.gate.wait()
        self.appends += 1
        results = {}
        for tp, batch in entries.items():
            epoch = self.leader_epochs.get(tp.partition)
            if self.fail_with is not None:
                results[tp] = Outcome(self.fail_with, -1)
            elif epoch is None:
                results[tp] = Outcome(Errors.NOT_LEADER_OR_FOLLOWER, -1)
            else:
                info = self.logs.log(tp.partition).append_as_leader(
                    batch, epoch, now_ms, origin=origin
                )
                results[tp] = Outcome(Errors.NONE, info.first_offset)
        return results


class FakeChannel:
    """Partition leaders by table; WriteTxnMarkers answers NONE unless told otherwise:
    ``errors`` per partition, or ``fail`` requests to fail outright (a lost connection)."""

    def __init__(self, leaders: Mapping[TopicPartition, int | None]) -> None:
        self.leaders = dict(leaders)
        self.errors: dict[TopicPartition, Errors] = {}
        self.fail = 0
        self.requests: list[tuple[int, tuple[TxnMarker, ...]]] = []
        # partition -> the markers it got, as (commit, producer id, producer epoch)
        self.written: dict[TopicPartition, list[tuple[bool, int, int]]] = {}

    def leader_of(self, topic_partition: TopicPartition) -> int | None:
        return self.leaders.get(topic_partition)

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> dict[tuple[int, TopicPartition], Errors]:
        self.requests.append((broker_id, tuple(markers)))
        if self.fail:
            self.fail -= 1
            raise ConnectionResetError("the connection was lost")
        answers = {}
        for marker in markers:
            for tp in marker.partitions:
                error = self.errors.get(tp, Errors.NONE)
                if error is Errors.NONE:
                    entry = (marker.commit, marker.producer_id, marker.producer_epoch)
                    self.written.setdefault(tp, []).append(entry)
                answers[(marker.producer_id, tp)] = error
        return answers


class FakeProducerIds:
    def __init__(self, first: int = 5000) -> None:
        self.next = first
        self.available = True

    async def generate_producer_id(self) -> int | None:
        if not self.available:
            return None
        self.next += 1
        return self.next - 1


async def replay_log(log: PartitionLog) -> TransactionLogReplay:
    """The log's records as the loader replays them (for assertions)."""
    return await load_transactions(log)
