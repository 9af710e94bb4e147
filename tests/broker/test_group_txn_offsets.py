"""Transactional offset commits through the real shell, ReplicaManager and ``__consumer_offsets``
log: the producer's transactional batch in the log, ``complete_transaction`` after the marker,
reloading a partition with open and ended transactions, and OffsetFetch's ``require_stable``
(KIP-447) through the handler — no sockets.

The TxnOffsetCommit and WriteTxnMarkers handlers are not here: the shell's
``txn_offset_commit`` / ``complete_transaction`` are called as those handlers will, and the
marker is appended to the log directly, as the coordinator's (``AppendOrigin.COORDINATOR``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetFetchRequest

from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import ControlRecordType, build_control_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import LOCAL, pets_led_here
from tests.broker.test_handlers_groups import (
    GROUP,
    OFFSETS_ID,
    Broker,
    GroupCluster,
    commit,
    fetch_v7,
    offsets_led_here,
    run,
    settle,
)

PETS0 = TopicPartition("pets", 0)
OFFSETS0 = TopicPartition(OFFSETS_TOPIC, 0)
PRODUCER, EPOCH = 4000, 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_led_here())


async def ready(cluster: GroupCluster) -> Broker:
    broker = Broker(cluster)
    cluster.publish(*offsets_led_here())
    await settle()
    return broker


async def txn_commit(
    broker: Broker, offset: int, *, epoch: int = EPOCH, **fields: Any
) -> dict[TopicPartition, Errors]:
    value = OffsetAndMetadata(offset=offset, commit_timestamp_ms=broker.clock.wall_clock_ms())
    request: dict[str, Any] = {
        "group_id": GROUP,
        "transactional_id": "mover",
        "producer_id": PRODUCER,
        "producer_epoch": epoch,
        "member_id": "",
        "generation_id": -1,
        "group_instance_id": None,
    }
    request.update(fields)
    return await broker.shell.txn_offset_commit(offsets={PETS0: value}, **request)


def offsets_log(cluster: GroupCluster) -> PartitionLog:
    hosted = cluster.replica_manager.get_partition(OFFSETS0)
    assert hosted is not None
    return hosted.log


def append_marker(cluster: GroupCluster, control: ControlRecordType, epoch: int = EPOCH) -> None:
    """The marker as the WriteTxnMarkers handler writes it (coordinator origin)."""
    log = offsets_log(cluster)
    marker = build_control_batch(control, producer_id=PRODUCER, producer_epoch=epoch, timestamp=1)
    latest = log.leader_epoch_cache.latest_epoch or 0
    log.append_as_leader(bytearray(marker), latest, 1, origin=AppendOrigin.COORDINATOR)


def stable_fetch(version: int = 7) -> Any:
    topic_class = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        version=version,
        group_id=GROUP,
        topics=[topic_class(name="pets", partition_indexes=[0])],
        require_stable=True,
    )


async def fetched(broker: Broker, request: Any) -> tuple[int, int]:
    """(error code, committed offset) of pets-0 in a v7 answer."""
    response = await broker.send(ApiKey.OFFSET_FETCH, request.API_VERSION, request)
    [topic] = response.topics
    [partition] = topic.partitions
    return partition.error_code, partition.committed_offset


def test_a_txn_offset_commit_is_the_producers_transactional_batch(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = await ready(cluster)
        assert await txn_commit(broker, 42) == {PETS0: Errors.NONE}
        log = offsets_log(cluster)
        data = b"".join(p.read_bytes() for p in log.read(0, 1 << 20, log.log_end_offset).slices)
        [(_, header)] = list(iter_batches(data))
        assert header.is_transactional and not header.is_control
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            PRODUCER,
            EPOCH,
            0,
        )
        # KIP-447: a stable read waits; a plain one sees what is committed (nothing yet).
        assert await fetched(broker, stable_fetch()) == (Errors.UNSTABLE_OFFSET_COMMIT, -1)
        assert await fetched(broker, fetch_v7(["pets"])) == (Errors.NONE, -1)
        append_marker(cluster, ControlRecordType.COMMIT)
        broker.shell.complete_transaction(0, PRODUCER, commit=True)
        assert await fetched(broker, stable_fetch()) == (Errors.NONE, 42)

    run(scenario)


def test_the_next_transaction_of_the_producer_is_written_too(cluster: GroupCluster) -> None:
    # Each transaction of one producer epoch sends a TxnOffsetCommit, every batch at sequence 0
    # (GroupMetadataManager.storeOffsets) appended with the coordinator's origin: the log checks
    # epochs only, so none is taken for a duplicate of the one before (as a client's would be,
    # answered with the first one's offsets and not written) or for a sequence gap.
    async def scenario() -> None:
        broker = await ready(cluster)
        for offset in [10, 20, 30]:
            assert await txn_commit(broker, offset) == {PETS0: Errors.NONE}
            assert await txn_commit(broker, offset + 1) == {PETS0: Errors.NONE}
            append_marker(cluster, ControlRecordType.COMMIT)
            broker.shell.complete_transaction(0, PRODUCER, commit=True)
            assert await fetched(broker, stable_fetch()) == (Errors.NONE, offset + 1)
        log = offsets_log(cluster)
        assert log.log_end_offset == 9  # 3 x (two commits and a marker)
        data = b"".join(p.read_bytes() for p in log.read(0, 1 << 20, 9).slices)
        sequences = [h.base_sequence for _, h in iter_batches(data) if not h.is_control]
        assert sequences == [0] * 6

    run(scenario)


def test_a_fenced_producer_epoch_is_refused_by_the_log(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = await ready(cluster)
        assert await txn_commit(broker, 1, epoch=5) == {PETS0: Errors.NONE}
        assert await txn_commit(broker, 2, epoch=4) == {PETS0: Errors.INVALID_PRODUCER_EPOCH}
        # A new epoch starts its sequence again.
        append_marker(cluster, ControlRecordType.ABORT, epoch=6)
        broker.shell.complete_transaction(0, PRODUCER, commit=False)
        assert await txn_commit(broker, 3, epoch=6) == {PETS0: Errors.NONE}

    run(scenario)


def test_reloading_keeps_open_transactions_pending(cluster: GroupCluster) -> None:
    # loadGroupsAndOffsets: a committed transaction loads committed, an open one pending; the
    # marker that comes later settles it on the new coordinator
    async def scenario() -> None:
        broker = await ready(cluster)
        await txn_commit(broker, 7)
        append_marker(cluster, ControlRecordType.COMMIT)
        broker.shell.complete_transaction(0, PRODUCER, commit=True)
        await txn_commit(broker, 8)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 99, topic="birds"))
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=LOCAL))
        await settle()
        assert await fetched(broker, stable_fetch()) == (Errors.UNSTABLE_OFFSET_COMMIT, -1)
        assert await fetched(broker, fetch_v7(["pets"])) == (Errors.NONE, 7)
        append_marker(cluster, ControlRecordType.ABORT)
        broker.shell.complete_transaction(0, PRODUCER, commit=False)
        assert await fetched(broker, stable_fetch()) == (Errors.NONE, 7)

    run(scenario)


def test_offset_fetch_v8_marks_unstable_partitions_per_group(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = await ready(cluster)
        await broker.send(ApiKey.OFFSET_COMMIT, 9, commit(9, 17))
        await txn_commit(broker, 18)
        group_class = OffsetFetchRequest.OffsetFetchRequestGroup
        topics = [group_class.OffsetFetchRequestTopics(name="pets", partition_indexes=[0])]

        def request(require_stable: bool) -> Any:
            return OffsetFetchRequest(
                version=9,
                require_stable=require_stable,
                groups=[
                    group_class(group_id="other", member_id=None, member_epoch=-1, topics=topics),
                    group_class(group_id=GROUP, member_id=None, member_epoch=-1, topics=None),
                ],
            )

        def answers(response: Any) -> dict[str, tuple[int, int]]:
            return {
                g.group_id: (
                    g.topics[0].partitions[0].error_code,
                    g.topics[0].partitions[0].committed_offset,
                )
                for g in response.groups
            }

        stable = await broker.send(ApiKey.OFFSET_FETCH, 9, request(True))
        assert answers(stable) == {
            "other": (Errors.NONE, -1),
            GROUP: (Errors.UNSTABLE_OFFSET_COMMIT, -1),
        }
        plain = await broker.send(ApiKey.OFFSET_FETCH, 9, request(False))
        assert answers(plain) == {"other": (Errors.NONE, -1), GROUP: (Errors.NONE, 17)}

    run(scenario)


def test_require_stable_before_v7_is_not_read(cluster: GroupCluster) -> None:
    # OffsetFetchRequest: requireStable exists from v7; older versions answer the committed value
    async def scenario() -> None:
        broker = await ready(cluster)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 3))
        await txn_commit(broker, 4)
        v6 = OffsetFetchRequest(
            version=6,
            group_id=GROUP,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="pets", partition_indexes=[0])],
        )
        assert await fetched(broker, v6) == (Errors.NONE, 3)

    run(scenario)
