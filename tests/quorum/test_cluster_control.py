"""Broker registration, heartbeats, fencing and controlled shutdown.

Follows Kafka's ClusterControlManagerTest, BrokerHeartbeatManagerTest and the broker parts of
ReplicationControlManagerTest / QuorumControllerTest, and KIP-631's broker lifecycle.
"""

from __future__ import annotations

import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    UnregisterBrokerRequest,
)
from pykraft.quorum.managers.sessions import BrokerControlState, HeartbeatInput, next_broker_state
from tests.quorum.helpers import (
    Harness,
    apply,
    endpoint,
    image_with,
    incarnation,
    leaders,
    partition,
    topic_id,
)

FENCED, UNFENCED = BrokerControlState.FENCED, BrokerControlState.UNFENCED
CONTROLLED, NOW = BrokerControlState.CONTROLLED_SHUTDOWN, BrokerControlState.SHUTDOWN_NOW


def register(broker_id: int, n: int | None = None) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        incarnation_id=incarnation(broker_id if n is None else n),
        listeners=(endpoint(broker_id),),
    )


def heartbeat(
    h: Harness,
    broker_id: int,
    *,
    offset: int | None = None,
    fence: bool = False,
    shut_down: bool = False,
):
    epoch = h.image.cluster.brokers[broker_id].epoch
    return h.run(
        BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=epoch,
            current_metadata_offset=h.image.offset if offset is None else offset,
            want_fence=fence,
            want_shut_down=shut_down,
        )
    )


# --- registration --------------------------------------------------------------------------


def test_broker_epoch_is_the_offset_of_the_register_record() -> None:
    # ClusterControlManagerTest.testRegistrationWithIncorrectClusterId's happy path: the epoch
    # is the offset at which the RegisterBrokerRecord commits (KIP-631).
    h = Harness(MetadataImage.EMPTY)
    result = h.controller.register_broker(h.image, register(1), 0)
    assert result.response.error.is_success()
    assert result.response.broker_epoch == 0
    assert result.records == (
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=incarnation(1),
            broker_epoch=0,
            end_points=(endpoint(1),),
            fenced=True,
        ),
    )
    h.commit(result)
    h.run(BrokerHeartbeatRequest(broker_id=1, broker_epoch=0, current_metadata_offset=0))
    second = h.run(register(2))
    assert second.broker_epoch == h.image.cluster.brokers[2].epoch == h.image.offset


@pytest.mark.parametrize(
    ("request_", "error", "message"),
    [
        (
            BrokerRegistrationRequest(broker_id=-1, incarnation_id=incarnation(1)),
            Errors.INVALID_REQUEST,
            "Invalid broker id -1: it must be non-negative.",
        ),
        (
            BrokerRegistrationRequest(broker_id=1, incarnation_id="not-a-uuid"),
            Errors.INVALID_REQUEST,
            None,
        ),
        (
            BrokerRegistrationRequest(
                broker_id=1, incarnation_id=incarnation(1), listeners=(endpoint(1), endpoint(1))
            ),
            Errors.INVALID_REQUEST,
            "Listener names must be unique.",
        ),
    ],
)
def test_invalid_registration_writes_nothing(request_, error, message) -> None:
    h = Harness(MetadataImage.EMPTY)
    result = h.controller.register_broker(h.image, request_, 0)
    assert result.records == ()
    assert result.response.error.error is error
    if message is not None:
        assert result.response.error.message == message


def test_duplicate_registration_rejected_while_session_alive() -> None:
    # ClusterControlManagerTest.testRegistrationWithIncorrectIncarnationId / KIP-631: another
    # incarnation may take the id only once the old one's session is gone.
    h = Harness(image_with({1: "unfenced"}), now_ms=0)
    result = h.controller.register_broker(h.image, register(1, n=99), 9000)
    assert result.records == ()
    assert result.response.error.error is Errors.DUPLICATE_BROKER_REGISTRATION
    assert result.response.error.message == "Another broker is registered with that broker id."
    # 9001 ms after the last contact (activation) the session is gone.
    later = h.controller.register_broker(h.image, register(1, n=99), 9001)
    assert later.response.error.is_success()
    last = later.records[-1]
    assert isinstance(last, RegisterBrokerRecord)
    assert last.incarnation_id == incarnation(99)


def test_same_incarnation_may_register_again() -> None:
    h = Harness(image_with({1: "unfenced"}))
    response = h.run(register(1))
    assert response.error.is_success()
    broker = h.image.cluster.brokers[1]
    assert (broker.epoch, broker.fenced) == (h.image.offset, True)


def test_new_incarnation_of_a_fenced_broker_replaces_it() -> None:
    h = Harness(image_with({1: "fenced"}))
    response = h.run(register(1, n=7))
    assert response.error.is_success()
    assert h.image.cluster.brokers[1].incarnation_id == incarnation(7)


def test_new_incarnation_drops_old_leaderships_in_the_same_batch() -> None:
    # The new registration starts fenced, so the old incarnation's leaderships move first and
    # the broker epoch accounts for the records before the RegisterBrokerRecord.
    image = image_with(
        {1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1), ((2, 1), (2, 1), 2)]}
    )
    h = Harness(image, now_ms=0)
    result = h.controller.register_broker(h.image, register(1, n=5), 20_000)
    assert result.records[:2] == (
        PartitionChangeRecord(partition_id=0, topic_id=topic_id("t"), isr=(2,), leader=2),
        PartitionChangeRecord(partition_id=1, topic_id=topic_id("t"), isr=(2,)),
    )
    assert result.response.broker_epoch == image.offset + 3
    h.commit(result)
    assert h.image.cluster.brokers[1].epoch == result.response.broker_epoch
    assert leaders(h.image, "t") == [2, 2]


# --- heartbeats ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broker_epoch", "message"),
    [
        (3, "Expected broker epoch 1, but got broker epoch 3"),
        (0, "Expected broker epoch 1, but got broker epoch 0"),
    ],
)
def test_heartbeat_with_stale_epoch(broker_epoch, message) -> None:
    # ClusterControlManager.checkBrokerEpoch
    h = Harness(image_with({0: "unfenced", 1: "unfenced"}))
    result = h.controller.broker_heartbeat(
        h.image,
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=broker_epoch, current_metadata_offset=5),
        0,
    )
    assert result.records == ()
    assert (result.response.error.error, result.response.error.message) == (
        Errors.STALE_BROKER_EPOCH,
        message,
    )


def test_heartbeat_from_unknown_broker() -> None:
    h = Harness(image_with({0: "unfenced"}))
    result = h.controller.broker_heartbeat(
        h.image, BrokerHeartbeatRequest(broker_id=9, broker_epoch=0, current_metadata_offset=5), 0
    )
    assert result.response.error.message == "No broker registration found for broker id 9"


def state(
    current: BrokerControlState,
    *,
    fence: bool = False,
    shut_down: bool = False,
    offset: int = 10,
    registered_at: int = 10,
    shutdown_offset: int = -1,
    lowest_active: int = 100,
    in_shutdown_in_image: bool = False,
) -> HeartbeatInput:
    return HeartbeatInput(
        current=current,
        want_fence=fence,
        want_shut_down=shut_down,
        current_metadata_offset=offset,
        registration_offset=registered_at,
        controlled_shutdown_offset=shutdown_offset,
        lowest_active_offset=lowest_active,
        in_controlled_shutdown_in_image=in_shutdown_in_image,
    )


@pytest.mark.parametrize(
    ("heartbeat_input", "leads", "expected"),
    [
        # BrokerHeartbeatManagerTest.testCalculateNextBrokerState
        (state(FENCED, offset=9), False, FENCED),  # not caught up yet
        (state(FENCED, offset=10), False, UNFENCED),  # caught up to its registration
        (state(FENCED, offset=10, fence=True), False, FENCED),
        (state(FENCED, shut_down=True), False, NOW),
        (state(FENCED, offset=10, in_shutdown_in_image=True), False, FENCED),
        (state(UNFENCED), True, UNFENCED),
        (state(UNFENCED, fence=True), True, FENCED),
        (state(UNFENCED, fence=True, shut_down=True), True, NOW),
        (state(UNFENCED, shut_down=True), True, CONTROLLED),
        (state(UNFENCED, shut_down=True), False, NOW),
        (state(CONTROLLED, shutdown_offset=50), True, CONTROLLED),
        (state(CONTROLLED, shutdown_offset=50, lowest_active=49), False, CONTROLLED),
        (state(CONTROLLED, shutdown_offset=50, lowest_active=50), False, NOW),
        (state(NOW), False, NOW),
    ],
)
def test_next_broker_state(heartbeat_input, leads, expected) -> None:
    assert next_broker_state(heartbeat_input, lambda: leads) is expected


def test_unfenced_once_caught_up_to_registration() -> None:
    # KIP-631: a broker stays fenced until its metadata offset reaches its registration record.
    h = Harness(MetadataImage.EMPTY)
    h.run(register(1))
    epoch = h.image.cluster.brokers[1].epoch
    behind = h.controller.broker_heartbeat(
        h.image,
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch, current_metadata_offset=epoch - 1),
        0,
    )
    assert behind.records == ()
    assert (behind.response.is_fenced, behind.response.is_caught_up) == (True, False)
    caught_up = h.controller.broker_heartbeat(
        h.image,
        BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch, current_metadata_offset=epoch),
        0,
    )
    assert caught_up.records == (
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=epoch, fenced=-1),
    )
    assert (caught_up.response.is_fenced, caught_up.response.is_caught_up) == (False, True)


def test_unfencing_elects_the_broker_for_leaderless_partitions() -> None:
    # ReplicationControlManager.handleBrokerUnfenced: leaderless partitions whose ISR holds the
    # broker get it back as leader in the same batch.
    h = Harness(image_with({1: "fenced", 2: "unfenced"}, {"t": [((1, 2), (1,), -1)]}))
    heartbeat(h, 1)
    assert leaders(h.image, "t") == [1]
    assert partition(h.image, "t", 0).leader_epoch == 1


def test_want_fence_fences_and_moves_leadership() -> None:
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]}))
    response = heartbeat(h, 1, fence=True)
    assert response.is_fenced
    assert h.image.cluster.brokers[1].fenced
    assert (leaders(h.image, "t"), partition(h.image, "t", 0).isr) == ([2], (2,))


# --- session timeouts ----------------------------------------------------------------------


def test_fence_on_session_timeout_after_9000_ms() -> None:
    # broker.session.timeout.ms 9000: still valid at exactly 9000 ms, stale 1 ms later.
    image = image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]})
    h = Harness(image, now_ms=1000)
    h.now_ms = 5000
    heartbeat(h, 2)
    assert h.controller.fence_stale_brokers(h.image, 10_000).records == ()
    result = h.controller.fence_stale_brokers(h.image, 10_001)
    assert result.response == (1,)
    assert result.records == (
        PartitionChangeRecord(partition_id=0, topic_id=topic_id("t"), isr=(2,), leader=2),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=1),
    )
    h.commit(result)
    assert h.controller.fence_stale_brokers(h.image, 10_001).records == ()
    assert h.controller.fence_stale_brokers(h.image, 14_001).response == (2,)


def test_one_stale_broker_per_batch_longest_silent_first() -> None:
    # Kafka's maybeFenceOneStaleBroker: each fencing sees the previous one's effect.
    h = Harness(
        image_with(
            {1: "unfenced", 2: "unfenced", 3: "unfenced"}, {"t": [((1, 2, 3), (1, 2, 3), 1)]}
        ),
        now_ms=0,
    )
    h.now_ms = 100
    heartbeat(h, 1)
    fenced: list[int] = []
    for _ in range(3):
        result = h.controller.fence_stale_brokers(h.image, 20_000)
        fenced.extend(result.response)
        h.commit(result)
    assert fenced == [2, 3, 1]
    p = partition(h.image, "t", 0)
    # Without ELR the ISR keeps its last member; nobody may lead.
    assert (p.leader, p.isr) == (-1, (1,))


def test_new_controller_gives_a_full_grace_period() -> None:
    # KIP-631: sessions live only on the active controller; after failover every broker gets
    # broker.session.timeout.ms from the new controller's activation.
    image = image_with({1: "unfenced"})
    h = Harness(image, now_ms=500_000)
    assert h.controller.fence_stale_brokers(h.image, 509_000).records == ()
    assert h.controller.fence_stale_brokers(h.image, 509_001).response == (1,)


def test_unclean_election_on_fencing_when_enabled_for_topic() -> None:
    # ReplicationControlManagerTest.testUncleanLeaderElection...: the last ISR member dies; with
    # unclean.leader.election.enable=true an out-of-sync replica takes over, ISR = [it].
    configs = {(2, "t"): {"unclean.leader.election.enable": "true"}}
    image = image_with(
        {1: "unfenced", 2: "unfenced"},
        {"t": [((1, 2), (1,), 1)], "u": [((1, 2), (1,), 1)]},
        configs,
    )
    h = Harness(image)
    h.commit(h.controller.fence_stale_brokers(h.image, 9001))
    t, u = partition(h.image, "t", 0), partition(h.image, "u", 0)
    assert (t.leader, t.isr, t.leader_recovery_state.value) == (2, (2,), 1)
    assert (u.leader, u.isr) == (-1, (1,))


def test_cluster_wide_unclean_default_applies_to_topics() -> None:
    configs = {(4, ""): {"unclean.leader.election.enable": "true"}}
    image = image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1,), 1)]}, configs)
    h = Harness(image)
    h.commit(h.controller.fence_stale_brokers(h.image, 9001))
    assert leaders(h.image, "t") == [2]


# --- controlled shutdown -------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_before_shutting_down() -> None:
    # QuorumControllerTest.testBrokerHeartbeat... / KIP-631 controlled shutdown.
    image = image_with(
        {1: "unfenced", 2: "unfenced", 3: "unfenced"},
        {"t": [((1, 2, 3), (1, 2, 3), 1), ((2, 1, 3), (2, 1, 3), 2), ((1, 3), (1,), 1)]},
    )
    h = Harness(image)
    for broker_id in (2, 3):
        heartbeat(h, broker_id)
    first = heartbeat(h, 1, shut_down=True)
    assert (first.in_controlled_shutdown, first.should_shut_down, first.is_fenced) == (
        True,
        False,
        False,
    )
    assert h.image.cluster.brokers[1].in_controlled_shutdown
    assert leaders(h.image, "t") == [2, 2, -1]
    assert [partition(h.image, "t", i).isr for i in range(3)] == [(2, 3), (2, 3), (1,)]
    # The other brokers have not yet reported the shutdown's records: not yet.
    assert not heartbeat(h, 1, shut_down=True).should_shut_down
    for broker_id in (2, 3):
        heartbeat(h, broker_id)
    final = heartbeat(h, 1, shut_down=True)
    assert (final.should_shut_down, final.is_fenced) == (True, True)
    assert h.image.cluster.brokers[1].fenced


def test_shutdown_without_leaderships_is_immediate() -> None:
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}, {"t": [((2, 1), (2, 1), 2)]}))
    response = heartbeat(h, 1, shut_down=True)
    assert (response.should_shut_down, response.is_fenced) == (True, True)
    assert partition(h.image, "t", 0).isr == (2,)


def test_fenced_broker_asking_to_shut_down_may_go() -> None:
    h = Harness(image_with({1: "fenced"}))
    result = h.controller.broker_heartbeat(
        h.image,
        BrokerHeartbeatRequest(
            broker_id=1, broker_epoch=0, current_metadata_offset=0, want_shut_down=True
        ),
        0,
    )
    assert result.response.should_shut_down
    assert result.records == (
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=1),
    )


# --- unregistration ------------------------------------------------------------------------


def test_unregister_unknown_broker() -> None:
    h = Harness(image_with({1: "unfenced"}))
    result = h.controller.unregister_broker(h.image, UnregisterBrokerRequest(7), 0)
    assert result.records == ()
    assert (result.response.error.error, result.response.error.message) == (
        Errors.BROKER_ID_NOT_REGISTERED,
        "Broker ID 7 is not currently registered",
    )


def test_unregister_removes_broker_from_isrs() -> None:
    # ReplicationControlManager.handleBrokerUnregistered
    image = image_with({1: "unfenced", 2: "unfenced"}, {"t": [((1, 2), (1, 2), 1)]})
    h = Harness(image)
    result = h.controller.unregister_broker(h.image, UnregisterBrokerRequest(1), 0)
    assert result.records[-1] == UnregisterBrokerRecord(broker_id=1, broker_epoch=0)
    h.commit(result)
    assert 1 not in h.image.cluster.brokers
    assert (leaders(h.image, "t"), partition(h.image, "t", 0).isr) == ([2], (2,))


def test_heartbeat_touches_the_session() -> None:
    h = Harness(image_with({1: "unfenced"}), now_ms=0)
    h.now_ms = 8000
    heartbeat(h, 1)
    assert h.controller.fence_stale_brokers(h.image, 17_000).records == ()
    assert h.controller.fence_stale_brokers(h.image, 17_001).response == (1,)


def test_register_then_apply_keeps_other_brokers() -> None:
    h = Harness(image_with({1: "unfenced"}))
    h.run(register(2))
    assert sorted(h.image.cluster.brokers) == [1, 2]
    assert apply(h.image, []) is h.image
