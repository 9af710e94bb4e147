"""Replica placement against Kafka's ``StripedReplicaPlacerTest`` vectors.

Each case reproduces one test of
metadata/src/test/java/org/apache/kafka/metadata/placement/StripedReplicaPlacerTest.java with the
same ``MockRandom``, so the striping, rack rotation, fenced-broker fallback and reshuffle all
match Kafka's placer bit for bit.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from pykraft.quorum.placement import (
    PlacementError,
    RackList,
    UsableBroker,
    place_replicas,
    shuffle,
)
from tests.quorum.java_random import KafkaMockRandom


def brokers(*specs: tuple[int, str | None, bool]) -> list[UsableBroker]:
    return [UsableBroker(broker_id, rack, fenced) for broker_id, rack, fenced in specs]


def check_rack_list(specs, expected_racks, expected_placements) -> None:
    rack_list = RackList(KafkaMockRandom(), brokers(*specs))
    assert rack_list.rack_names == expected_racks
    for replication_factor, expected in expected_placements:
        assert rack_list.place(replication_factor) == expected


def test_avoid_fenced_replica_if_possible_on_single_rack() -> None:
    # StripedReplicaPlacerTest.testAvoidFencedReplicaIfPossibleOnSingleRack: the fifth placement
    # comes after a reshuffle (epoch == number of unfenced brokers).
    check_rack_list(
        [(3, None, False), (1, None, True), (0, None, False), (4, None, False), (2, None, False)],
        [None],
        [
            (4, [3, 4, 0, 2]),
            (4, [4, 0, 2, 3]),
            (4, [0, 2, 3, 4]),
            (4, [2, 3, 4, 0]),
            (4, [0, 4, 3, 2]),
        ],
    )


def test_placement_on_fenced_replica_on_single_rack() -> None:
    # StripedReplicaPlacerTest.testPlacementOnFencedReplicaOnSingleRack: fenced broker 1 is
    # used, but never as the first replica.
    check_rack_list(
        [(3, None, False), (1, None, True), (2, None, False)],
        [None],
        [(3, [3, 2, 1]), (3, [2, 3, 1]), (3, [3, 2, 1]), (3, [2, 3, 1])],
    )


def test_rack_list_with_multiple_racks() -> None:
    # StripedReplicaPlacerTest.testRackListWithMultipleRacks
    check_rack_list(
        [
            (11, "1", False),
            (10, "1", False),
            (30, "3", False),
            (31, "3", False),
            (21, "2", False),
            (20, "2", True),
        ],
        ["1", "2", "3"],
        [(4, [11, 21, 31, 10]), (4, [21, 30, 10, 20]), (4, [31, 11, 21, 30])],
    )


def test_rack_list_with_invalid_racks() -> None:
    # StripedReplicaPlacerTest.testRackListWithInvalidRacks: racks with only fenced brokers.
    check_rack_list(
        [
            (11, "1", False),
            (10, "1", False),
            (30, "3", True),
            (31, "3", True),
            (20, "2", True),
            (21, "2", True),
            (41, "4", False),
            (40, "4", True),
        ],
        ["1", "2", "3", "4"],
        [(4, [41, 11, 21, 30]), (4, [10, 20, 31, 41]), (4, [41, 21, 30, 11])],
    )


def test_multi_partition_topic_on_single_unfenced_broker() -> None:
    # StripedReplicaPlacerTest.testMultiPartitionTopicPlacementOnSingleUnfencedBroker
    placements = place_replicas(
        brokers((0, None, False), (1, None, True)),
        num_partitions=3,
        replication_factor=1,
        rng=KafkaMockRandom(),
    )
    assert placements == ((0,), (0,), (0,))


@pytest.mark.parametrize(
    ("specs", "replication_factor", "message"),
    [
        # StripedReplicaPlacerTest.testNonPositiveReplicationFactor
        (
            [(0, None, False)],
            0,
            "Invalid replication factor 0: the replication factor must be positive.",
        ),
        (
            [(0, None, False)],
            -1,
            "Invalid replication factor -1: the replication factor must be positive.",
        ),
        # StripedReplicaPlacerTest.testNotEnoughBrokers
        (
            [(11, "1", False), (10, "1", False)],
            3,
            "The target replication factor of 3 cannot be reached because only 2 broker(s) are "
            "registered.",
        ),
        # StripedReplicaPlacerTest.testAllBrokersFenced
        ([(11, "1", True), (10, "1", True)], 1, "All brokers are currently fenced."),
    ],
)
def test_placement_errors(specs, replication_factor, message) -> None:
    with pytest.raises(PlacementError) as error:
        place_replicas(
            brokers(*specs),
            num_partitions=1,
            replication_factor=replication_factor,
            rng=KafkaMockRandom(),
        )
    assert str(error.value) == message


def test_successful_placement() -> None:
    # StripedReplicaPlacerTest.testSuccessfulPlacement: the fifth partition follows a reshuffle.
    placements = place_replicas(
        brokers((0, None, False), (3, None, False), (2, None, False), (1, None, False)),
        num_partitions=5,
        replication_factor=3,
        rng=KafkaMockRandom(),
    )
    assert placements == ((2, 3, 0), (3, 0, 1), (0, 1, 2), (1, 2, 3), (1, 0, 2))


def test_even_distribution() -> None:
    # StripedReplicaPlacerTest.testEvenDistribution: 200 partitions, RF 2, 4 brokers.
    placements = place_replicas(
        brokers(*[(b, None, False) for b in range(4)]),
        num_partitions=200,
        replication_factor=2,
        rng=KafkaMockRandom(),
    )
    counts = Counter(placements)
    assert counts == {
        (0, 1): 14,
        (0, 2): 22,
        (0, 3): 14,
        (1, 0): 17,
        (1, 2): 17,
        (1, 3): 16,
        (2, 0): 13,
        (2, 1): 17,
        (2, 3): 20,
        (3, 0): 20,
        (3, 1): 19,
        (3, 2): 11,
    }


def test_rack_aware_placement_spans_every_rack() -> None:
    # With 3 racks x 3 brokers and RF 3 every partition gets one replica per rack, and every
    # broker leads some partition.
    specs = [(r * 10 + b, str(r), False) for r in range(3) for b in range(3)]
    placements = place_replicas(
        brokers(*specs), num_partitions=90, replication_factor=3, rng=random.Random(7)
    )
    for replicas in placements:
        assert len({broker // 10 for broker in replicas}) == 3
    assert {replicas[0] for replicas in placements} == {b for b, _, _ in specs}


def test_same_seed_same_placement() -> None:
    specs = [(b, None, False) for b in range(5)]
    first = place_replicas(
        brokers(*specs), num_partitions=12, replication_factor=3, rng=random.Random(42)
    )
    second = place_replicas(
        brokers(*specs), num_partitions=12, replication_factor=3, rng=random.Random(42)
    )
    assert first == second


def test_shuffle_matches_java_collections_shuffle_order() -> None:
    # Java's Collections.shuffle swaps (i-1, nextInt(i)) for i = size..2; so does ours.
    class Fixed:
        def __init__(self) -> None:
            self.bounds: list[int] = []

        def randrange(self, bound: int, /) -> int:
            self.bounds.append(bound)
            return 0

    rng = Fixed()
    items = [1, 2, 3, 4]
    shuffle(items, rng)
    assert rng.bounds == [4, 3, 2]
    assert items == [2, 3, 4, 1]
