"""A Partition on a real PartitionLog with everything it asks its broker for faked: a clock,
broker registrations, min.insync.replicas, the AlterPartition channel (Kafka's
``MockAlterPartitionManager``) and a record of high-watermark moves. Shared by the
test_partition*.py files, in the spirit of Kafka's ``AbstractPartitionTest``."""

from __future__ import annotations

from pathlib import Path

from pykraft.broker.alter_partition import RecordedAlterPartitions
from pykraft.broker.partition import (
    FetchIsolation,
    LeaderAndIsr,
    LogReadInfo,
    Partition,
    PartitionContext,
)
from pykraft.metadata.image import BrokerRegistration
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

LOCAL = 1
F2 = 2
F3 = 3
TOPIC_ID = "ThIaNwRnSM2Nt9Mx1v0RvA"
TP = TopicPartition("pets", 0)
LAG_MS = 30_000  # replica.lag.time.max.ms


def broker_epoch(broker_id: int) -> int:
    return 100 + broker_id


def batch(*values: bytes, timestamp: int = 1000, **fields: int) -> bytearray:
    records = [SimpleRecord(value=v, timestamp=timestamp + i) for i, v in enumerate(values)]
    return bytearray(build_batch(records, **fields))  # type: ignore[arg-type]


def change(
    leader: int = LOCAL,
    leader_epoch: int = 1,
    partition_epoch: int = 1,
    replicas: tuple[int, ...] = (LOCAL,),
    isr: tuple[int, ...] | None = None,
) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        replicas=replicas,
        isr=replicas if isr is None else isr,
    )


class Env:
    """The broker around one Partition, every input settable by the test."""

    def __init__(self, tmp_path: Path, min_isr: int = 1) -> None:
        self.now_ms = 1_000_000
        self.min_isr = min_isr
        self.brokers = {
            broker_id: BrokerRegistration(
                id=broker_id,
                epoch=broker_epoch(broker_id),
                incarnation_id=f"i{broker_id}",
                fenced=False,
            )
            for broker_id in (LOCAL, F2, F3)
        }
        self.alter = RecordedAlterPartitions()
        self.high_watermark_moves: list[tuple[int, int]] = []
        self.last_stable_offset_moves: list[tuple[int, int]] = []
        # Committed ISR changes, True for a shrink (Kafka's MockAlterPartitionListener).
        self.isr_commits: list[bool] = []
        self.log = PartitionLog.open(tmp_path / TP.dir_name(), LogConfig(segment_bytes=1 << 20))
        context = PartitionContext(
            monotonic_ms=lambda: self.now_ms,
            replica_lag_time_max_ms=LAG_MS,
            min_insync_replicas=lambda topic: self.min_isr,
            broker=self.brokers.get,
            local_broker_epoch=lambda: broker_epoch(LOCAL),
            alter_partition=self.alter,
            on_high_watermark_moved=lambda tp, old, new: self.high_watermark_moves.append(
                (old, new)
            ),
            on_last_stable_offset_moved=lambda tp, old, new: self.last_stable_offset_moves.append(
                (old, new)
            ),
            on_isr_committed=self.isr_commits.append,
        )
        self.partition = Partition(TP, TOPIC_ID, self.log, LOCAL, context)

    def seed(self, count: int, leader_epoch: int) -> None:
        """Kafka's seedLogData: ``count`` records written at ``leader_epoch``, one per batch."""
        for i in range(count):
            self.log.append_as_leader(batch(f"r{i}".encode()), leader_epoch, self.now_ms)

    def append(self, *values: bytes, acks: int = 1) -> int:
        info = self.partition.append_records_to_leader(
            batch(*values), required_acks=acks, now_ms=self.now_ms
        )
        return info.first_offset

    def fetch_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        *,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
        replica_epoch: int | None = None,
    ) -> LogReadInfo:
        """Kafka's fetchFollower: a replica's fetch as the leader reads it."""
        return self.partition.fetch_records(
            replica_id=replica_id,
            fetch_offset=fetch_offset,
            max_bytes=1 << 20,
            isolation=FetchIsolation.LOG_END,
            min_one_batch=True,
            current_leader_epoch=current_leader_epoch,
            last_fetched_epoch=last_fetched_epoch,
            replica_epoch=broker_epoch(replica_id) if replica_epoch is None else replica_epoch,
            follower_log_start_offset=0,
        )

    def consumer_read(self, offset: int, **kwargs: object) -> bytes:
        arguments: dict[str, object] = {
            "replica_id": -1,
            "fetch_offset": offset,
            "max_bytes": 1 << 20,
            "isolation": FetchIsolation.HIGH_WATERMARK,
            "min_one_batch": True,
        }
        arguments.update(kwargs)
        info = self.partition.fetch_records(**arguments)  # type: ignore[arg-type]
        return info.fetched_data.read_bytes()

    def isr_update(self, index: int = 0) -> tuple[int, ...]:
        """The ISR the ``index``-th queued AlterPartition proposes."""
        return self.alter.items[index][0].change.new_isr_ids

    def close(self) -> None:
        self.log.close()
