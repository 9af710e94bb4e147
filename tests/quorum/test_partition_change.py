"""Leader election and ISR changes, following Kafka's ``PartitionChangeBuilderTest``.

Cases mirror metadata/src/test/java/org/apache/kafka/controller/PartitionChangeBuilderTest.java
(testElectLeader, testNoChange, testIsrChanges, testUncleanLeaderElection...) with ELR disabled
(eligible.leader.replicas.version 0; the ELR cases are in test_partition_change_elr.py).
"""

from __future__ import annotations

import pytest

from pykraft.metadata.image import PartitionRegistration
from pykraft.metadata.records import LeaderRecoveryState, PartitionChangeRecord
from pykraft.quorum.managers.partition_change import (
    Election,
    ElectionResult,
    build_partition_change,
    elect_leader,
)

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
# PartitionChangeBuilderTest's FOO: replicas [2, 1, 3], ISR [2, 1, 3], leader 1.
FOO = PartitionRegistration(
    replicas=(2, 1, 3), isr=(2, 1, 3), leader=1, leader_epoch=100, partition_epoch=200
)
# BAR: replicas [1, 2, 3, 4], ISR [1, 2, 3], leader 1 (a reassignment in Kafka; plain here).
BAR = PartitionRegistration(
    replicas=(1, 2, 3, 4), isr=(1, 2, 3), leader=1, leader_epoch=100, partition_epoch=200
)
# A partition whose only ISR member was fenced: leader -1, ISR keeps the last member.
OFFLINE = PartitionRegistration(
    replicas=(2, 1, 3), isr=(3,), leader=-1, leader_epoch=7, partition_epoch=9
)


def acceptor(*brokers: int):
    return lambda replica: replica in brokers


@pytest.mark.parametrize(
    ("partition", "isr", "election", "acceptable", "expected"),
    [
        # testElectLeader: the current leader stays while valid.
        (FOO, (2, 1, 3), Election.ONLINE, (1, 2, 3), ElectionResult(1, False)),
        # Current leader not acceptable: first valid replica in replica order.
        (FOO, (2, 1, 3), Election.ONLINE, (2, 3), ElectionResult(2, False)),
        (FOO, (2, 1, 3), Election.ONLINE, (3,), ElectionResult(3, False)),
        # Current leader out of the target ISR.
        (FOO, (2, 3), Election.ONLINE, (1, 2, 3), ElectionResult(2, False)),
        # Nobody valid: no leader, not unclean.
        (FOO, (2, 1, 3), Election.ONLINE, (), ElectionResult(-1, False)),
        (FOO, (1,), Election.ONLINE, (2, 3), ElectionResult(-1, False)),
        # UNCLEAN: the ISR first, then any acceptable replica.
        (FOO, (1,), Election.UNCLEAN, (1, 2, 3), ElectionResult(1, False)),
        (FOO, (1,), Election.UNCLEAN, (2, 3), ElectionResult(2, True)),
        (FOO, (1,), Election.UNCLEAN, (3,), ElectionResult(3, True)),
        (FOO, (1,), Election.UNCLEAN, (), ElectionResult(-1, False)),
        # PREFERRED: the first replica if valid, else the current leader, else the rest.
        (FOO, (2, 1, 3), Election.PREFERRED, (1, 2, 3), ElectionResult(2, False)),
        (FOO, (2, 1, 3), Election.PREFERRED, (1, 3), ElectionResult(1, False)),
        (FOO, (2, 1, 3), Election.PREFERRED, (3,), ElectionResult(3, False)),
        (FOO, (1, 3), Election.PREFERRED, (1, 2, 3), ElectionResult(1, False)),
        (OFFLINE, (3,), Election.PREFERRED, (3,), ElectionResult(3, False)),
        (OFFLINE, (3,), Election.ONLINE, (1, 2), ElectionResult(-1, False)),
    ],
)
def test_elect_leader(partition, isr, election, acceptable, expected) -> None:
    assert elect_leader(partition, isr, election, acceptor(*acceptable)) == expected


def change(**fields) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, **fields)


@pytest.mark.parametrize(
    ("partition", "target_isr", "election", "acceptable", "recovery", "expected"),
    [
        # testNoChange: same ISR, valid leader -> no record.
        (FOO, None, Election.ONLINE, (1, 2, 3), None, None),
        (FOO, (2, 1, 3), Election.ONLINE, (1, 2, 3), None, None),
        # testIsrChanges: a shrink keeps the leader and changes only the ISR (no leader epoch
        # bump since metadata version 3.6, KAFKA-15021).
        (FOO, (2, 1), Election.ONLINE, (1, 2, 3), None, change(isr=(2, 1))),
        (BAR, (1, 2, 3, 4), Election.ONLINE, (1, 2, 3, 4), None, change(isr=(1, 2, 3, 4))),
        # Leader leaves the ISR: a new leader from the ISR, in replica order.
        (FOO, (2, 3), Election.ONLINE, (1, 2, 3), None, change(isr=(2, 3), leader=2)),
        # The last ISR member goes: ISR is kept (never empty without ELR), leader -1.
        (OFFLINE, (), Election.ONLINE, (1, 2), None, None),
        (
            PartitionRegistration(replicas=(2, 1), isr=(1,), leader=1),
            (),
            Election.ONLINE,
            (2,),
            None,
            change(leader=-1),
        ),
        # testUncleanLeaderElection: leader outside the ISR, ISR reset, RECOVERING.
        (
            OFFLINE,
            (3,),
            Election.UNCLEAN,
            (1, 2),
            None,
            change(isr=(2,), leader=2, leader_recovery_state=LeaderRecoveryState.RECOVERING.value),
        ),
        (
            PartitionRegistration(replicas=(2, 1), isr=(1,), leader=1),
            (),
            Election.UNCLEAN,
            (2,),
            None,
            change(isr=(2,), leader=2, leader_recovery_state=1),
        ),
        # Preferred election moves leadership back to the first replica.
        (FOO, None, Election.PREFERRED, (1, 2, 3), None, change(leader=2)),
        # Leader recovery finished: the leader reports RECOVERED.
        (
            PartitionRegistration(
                replicas=(2, 1),
                isr=(2,),
                leader=2,
                leader_recovery_state=LeaderRecoveryState.RECOVERING,
            ),
            (2, 1),
            Election.ONLINE,
            (1, 2),
            LeaderRecoveryState.RECOVERED,
            change(isr=(2, 1), leader_recovery_state=0),
        ),
    ],
)
def test_build_partition_change(
    partition, target_isr, election, acceptable, recovery, expected
) -> None:
    record = build_partition_change(
        partition,
        topic_id=TOPIC_ID,
        partition_id=0,
        acceptable=acceptor(*acceptable),
        target_isr=target_isr,
        election=election,
        target_leader_recovery_state=recovery,
    )
    assert record == expected


def test_leader_change_bumps_leader_epoch_and_isr_change_only_partition_epoch() -> None:
    # PartitionRegistration.merge: the epochs are the replay's business.
    shrink = build_partition_change(
        FOO, topic_id=TOPIC_ID, partition_id=0, acceptable=acceptor(1, 2, 3), target_isr=(1, 3)
    )
    moved = build_partition_change(
        FOO, topic_id=TOPIC_ID, partition_id=0, acceptable=acceptor(2, 3), target_isr=(2, 3)
    )
    assert shrink is not None and moved is not None
    assert (FOO.merge(shrink).leader_epoch, FOO.merge(shrink).partition_epoch) == (100, 201)
    assert (FOO.merge(moved).leader_epoch, FOO.merge(moved).partition_epoch) == (101, 201)
