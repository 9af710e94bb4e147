"""Offline log dirs in broker heartbeats (KIP-858): the controller moves leadership off them.

Kafka's ``ReplicationControlManager.handleDirectoriesOffline`` runs
``generateLeaderAndIsrUpdates(brokerToRemove=brokerId)`` over the partitions on each newly
offline dir; pykraft gets those partitions from the heartbeat (quorum.managers.directories).
"""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.metadata.records import PartitionChangeRecord, uuid_to_kafka_string
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import BrokerHeartbeatRequest, OfflineReplica
from pykraft.quorum.managers.directories import MAX_OFFLINE_REPLICAS
from tests.quorum.helpers import Harness, image_with, partition, topic_id

DIR_A = uuid_to_kafka_string((1000).to_bytes(16, "big"))


def offline(name: str, index: int) -> OfflineReplica:
    return OfflineReplica(topic_id(name), index)


def heartbeat(
    h: Harness,
    broker_id: int,
    replicas: tuple[OfflineReplica, ...] = (),
    dirs: tuple[str, ...] | None = None,
    **fields: Any,
) -> Any:
    """A heartbeat caught up to the image; ``dirs`` default to DIR_A when replicas are given."""
    request = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=h.image.cluster.brokers[broker_id].epoch,
        current_metadata_offset=fields.pop("current_metadata_offset", h.image.offset),
        offline_log_dirs=(DIR_A,) if dirs is None and replicas else dirs or (),
        offline_replicas=replicas,
        **fields,
    )
    return h.controller.broker_heartbeat(h.image, request, h.now_ms)


# name -> (replicas, isr, leader) of partition 0, the broker reporting, the replica it reports,
# and the partition's (isr, leader) afterwards; None: nothing is written.
RULES = [
    # The leader's dir fails: the next ISR member in replica order leads, the leader leaves.
    (((1, 2, 3), (1, 2, 3), 1), 1, True, ((2, 3), 2)),
    # A follower's dir fails: it leaves the ISR, the leader stays.
    (((1, 2, 3), (1, 2, 3), 1), 3, True, ((1, 2), 1)),
    # The leader is the last ISR member: it stays in the ISR (never empty), nobody leads.
    (((1, 2), (1,), 1), 1, True, ((1,), -1)),
    # A follower already out of the ISR: nothing to do.
    (((1, 2), (1,), 1), 2, True, None),
    # The broker reports no replica of this partition: nothing to do.
    (((1, 2), (1, 2), 1), 1, False, None),
    # Fenced brokers cannot lead: the leader moves only to an active ISR member.
    (((1, 2, 3), (1, 2, 3), 1), 1, True, ((2, 3), 3)),
]
STATES = ["unfenced", "unfenced", "unfenced", "unfenced", "unfenced", "fenced-2"]


@pytest.mark.parametrize(("rule", "states"), list(zip(RULES, STATES, strict=True)))
def test_offline_dir_rules(rule: Any, states: str) -> None:
    (replicas, isr, leader), reporter, reports, expected = rule
    brokers = {1: "unfenced", 2: "unfenced", 3: "unfenced"}
    if states == "fenced-2":
        brokers[2] = "fenced"
    h = Harness(image_with(brokers, {"t": [(replicas, isr, leader)]}))
    before = partition(h.image, "t", 0)
    result = heartbeat(h, reporter, (offline("t", 0),) if reports else ())
    assert result.response.error.is_success()
    assert result.response.is_fenced is False  # the broker keeps serving its other dirs
    h.commit(result)
    after = partition(h.image, "t", 0)
    if expected is None:
        assert result.records == ()
        assert after == before
        return
    assert all(isinstance(r, PartitionChangeRecord) for r in result.records)
    assert (after.isr, after.leader) == expected
    assert after.leader_epoch == before.leader_epoch + (after.leader != before.leader)


def test_only_the_reported_partitions_move() -> None:
    # Broker 1 leads t-0 and t-1; only t-1 is on the failed dir.
    h = Harness(
        image_with(
            {1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1), ((1, 2), (1, 2), 1)]}
        )
    )
    h.commit(heartbeat(h, 1, (offline("t", 1),)))
    assert (partition(h.image, "t", 0).leader, partition(h.image, "t", 0).isr) == (1, (1, 2))
    assert (partition(h.image, "t", 1).leader, partition(h.image, "t", 1).isr) == (2, (2,))


def test_repeated_heartbeats_write_nothing_more() -> None:
    # Every heartbeat names the offline dirs again; once applied, they change nothing.
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]}))
    first = heartbeat(h, 1, (offline("t", 0),))
    assert len(first.records) == 1
    h.commit(first)
    again = heartbeat(h, 1, (offline("t", 0),))
    assert again.records == ()
    assert again.response.error.is_success()


def test_unknown_and_deleted_partitions_are_skipped() -> None:
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]}))
    result = heartbeat(h, 1, (offline("gone", 0), offline("t", 7)))
    assert result.records == ()
    assert result.response.error.is_success()


def test_unclean_election_when_the_topic_allows_it() -> None:
    # As for a fenced broker: with unclean.leader.election.enable the out-of-sync replica leads.
    h = Harness(
        image_with(
            {1: "unfenced", 2: "unfenced"},
            {"t": [((1, 2), (1,), 1)]},
            configs={(2, "t"): {"unclean.leader.election.enable": "true"}},
        )
    )
    h.commit(heartbeat(h, 1, (offline("t", 0),)))
    assert (partition(h.image, "t", 0).leader, partition(h.image, "t", 0).isr) == (2, (2,))


def test_a_fenced_broker_reporting_offline_dirs_writes_nothing() -> None:
    # A fenced broker is in no ISR to leave (Kafka skips handleDirectoriesOffline then).
    # Not caught up to its registration yet, so it stays fenced.
    h = Harness(image_with({1: "fenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 2)]}))
    result = heartbeat(h, 1, (offline("t", 0),), current_metadata_offset=-1)
    assert result.response.is_fenced
    assert result.records == ()


def test_a_shutdown_request_moves_everything_once() -> None:
    # want_shut_down and offline dirs together: the controlled shutdown already moves every
    # leadership; no second record for the same partition in the batch.
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]}))
    result = heartbeat(h, 1, (offline("t", 0),), want_shut_down=True)
    changes = [r for r in result.records if isinstance(r, PartitionChangeRecord)]
    assert len(changes) == 1
    h.commit(result)
    assert partition(h.image, "t", 0).leader == 2


@pytest.mark.parametrize(
    ("dirs", "replicas", "message"),
    [
        (("not-a-uuid",), (), "Invalid offline log dir id"),
        ((uuid_to_kafka_string((1).to_bytes(16, "big")),), (), "reserved directory id"),
        ((), (OfflineReplica("x", 0),), "without an offline log dir"),
        ((DIR_A,), (OfflineReplica(topic_id("t"), -1),), "non-negative"),
        ((DIR_A,), (OfflineReplica(topic_id("t"), 0),) * (MAX_OFFLINE_REPLICAS + 1), "More than"),
    ],
)
def test_malformed_offline_dirs_are_rejected(
    dirs: tuple[str, ...], replicas: tuple[OfflineReplica, ...], message: str
) -> None:
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]}))
    result = heartbeat(h, 1, replicas, dirs)
    assert result.records == ()
    assert result.response.error.error is Errors.INVALID_REQUEST
    assert message in (result.response.error.message or "")


def test_the_last_isr_member_on_an_offline_dir_is_not_re_elected_when_another_unfences() -> None:
    # Kafka's isActive(brokerId, directoryId): a replica on an offline dir never leads. Broker 1
    # is the last ISR member of t-0, so it stays in the ISR, leaderless; broker 3 unfencing
    # elects leaders for leaderless partitions and must still skip it.
    h = Harness(image_with({1: "unfenced", 2: "unfenced", 3: "fenced"}, {"t": [((1, 2), (1,), 1)]}))
    h.commit(heartbeat(h, 1, (offline("t", 0),)))
    assert (partition(h.image, "t", 0).leader, partition(h.image, "t", 0).isr) == (-1, (1,))
    unfenced = heartbeat(h, 3)
    assert unfenced.response.is_fenced is False
    h.commit(unfenced)
    assert partition(h.image, "t", 0).leader == -1


def test_an_unclean_election_skips_replicas_reported_offline() -> None:
    # Broker 1 (out of the ISR) reported t-0 offline; the leader 2 is fenced: unclean election
    # would take the first acceptable replica outside the ISR, 1, but its dir is offline: 3.
    h = Harness(
        image_with(
            {1: "unfenced", 2: "unfenced", 3: "unfenced"},
            {"t": [((1, 2, 3), (2,), 2)]},
            configs={(2, "t"): {"unclean.leader.election.enable": "true"}},
        )
    )
    assert heartbeat(h, 1, (offline("t", 0),)).records == ()  # in no ISR: nothing to write
    h.commit(heartbeat(h, 2, want_fence=True))
    assert (partition(h.image, "t", 0).leader, partition(h.image, "t", 0).isr) == (3, (3,))


def test_a_heartbeat_without_offline_dirs_clears_the_report() -> None:
    # The report is the broker's latest word: a dir that is back (after a restart the broker
    # registers anew) no longer counts as offline.
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 2)]}))
    heartbeat(h, 1, (offline("t", 0),))
    replica_offline = h.controller.sessions.replica_offline(h.image)
    assert replica_offline(1, topic_id("t"), 0) and not replica_offline(2, topic_id("t"), 0)
    heartbeat(h, 1, (), dirs=())
    assert not h.controller.sessions.replica_offline(h.image)(1, topic_id("t"), 0)
