"""kafka-topics --describe partition lines (Kafka's TopicCommand.PartitionDescription), with
KIP-966's Elr / LastKnownElr columns."""

from __future__ import annotations

from pykraft.metadata.api.topics import PartitionDescription
from pykraft.topics_cmd import partition_line


def test_elr_columns_list_ids_and_read_na_when_unknown() -> None:
    leaderless = PartitionDescription(
        partition=0,
        leader=-1,
        leader_epoch=3,
        replicas=(1, 2, 3),
        isr=(),
        eligible_leader_replicas=(1, 2),
        last_known_elr=(3,),
    )
    assert partition_line("t", leaderless) == (
        "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 1,2,3\tIsr: \tElr: 1,2\tLastKnownElr: 3"
    )
    healthy = PartitionDescription(
        partition=1,
        leader=1,
        leader_epoch=0,
        replicas=(1, 2),
        isr=(1, 2),
        eligible_leader_replicas=(),
        last_known_elr=(),
    )
    assert partition_line("t", healthy).endswith("\tIsr: 1,2\tElr: \tLastKnownElr: ")
    # A controller that does not report ELR (older pykraft): Kafka's N/A.
    old = PartitionDescription(partition=2, leader=1, leader_epoch=0, replicas=(1,), isr=(1,))
    assert partition_line("t", old).endswith("\tElr: N/A\tLastKnownElr: N/A")
