"""Offset expiry (KIP-211) through the real group coordinator shell, ReplicaManager and
``__consumer_offsets`` log, on a fake clock: the shell's timer runs the check, the tombstones
reach the log, and a reload of the partition does not bring the expired offsets back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.coordinator.group.loader import read_partition_records
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC, OffsetsReplay
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import LOCAL, pets_led_here
from tests.broker.test_handlers_groups import (
    GROUP,
    OFFSETS_ID,
    Broker,
    GroupCluster,
    commit,
    offsets_led_here,
    run,
    settle,
)

RETENTION_MS = 60_000
INTERVAL_MS = 1_000
PETS0 = TopicPartition("pets", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_led_here())


async def replayed_groups(broker: Broker) -> dict[str, dict[TopicPartition, int]]:
    """What a coordinator loading ``__consumer_offsets`` now would find."""
    hosted = broker.cluster.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, 0))
    assert hosted is not None
    replay = OffsetsReplay()
    await read_partition_records(hosted.log, replay.replay)
    return {
        g.group_id: {tp: c.value.offset for tp, c in g.offsets.items()}
        for g in replay.loaded(now_ms=0).groups
    }


def committed(broker: Broker, group_id: str = GROUP) -> dict[TopicPartition, int]:
    _, offsets = broker.shell.fetch_offsets(group_id, None)
    return {f.topic_partition: f.offset.offset for f in offsets if f.offset is not None}


def test_expired_offsets_are_tombstoned_and_stay_gone_after_a_reload(
    cluster: GroupCluster,
) -> None:
    async def scenario() -> None:
        broker = Broker(
            cluster,
            offsets_retention_ms=RETENTION_MS,
            offsets_retention_check_interval_ms=INTERVAL_MS,
        )
        cluster.publish(*offsets_led_here())
        await settle()
        response = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 5))
        assert response.topics[0].partitions[0].error_code == Errors.NONE
        broker.clock.now_ms += RETENTION_MS // 2
        late = commit(8, 7)
        late.group_id = "late"
        await broker.send(ApiKey.OFFSET_COMMIT, 8, late)
        await settle()
        assert broker.shell.core.next_deadline_ms() is not None  # the timer is armed
        broker.clock.now_ms += RETENTION_MS // 2 + INTERVAL_MS
        broker.shell.poll()  # what the timer does when the real clock gets there
        await settle()
        assert committed(broker) == {}
        assert committed(broker, "late") == {PETS0: 7}  # committed 30 s later: not yet
        log = await replayed_groups(broker)
        assert GROUP not in log and log["late"] == {PETS0: 7}
        # A new leader epoch reloads the partition from the log: still gone.
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=LOCAL))
        await settle()
        assert committed(broker) == {}
        assert committed(broker, "late") == {PETS0: 7}
        assert broker.shell.core.partitions  # loaded again
        await broker.shell.shutdown()

    run(scenario)
