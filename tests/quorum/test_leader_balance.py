"""Automatic preferred-leader balancing (auto.leader.rebalance.enable), following Kafka's
ReplicationControlManagerTest.testBalancePartitionLeaders (imbalanced partitions, PREFERRED
elections only to ISR members that may lead) and QuorumControllerTest
.testBalancePartitionLeaders (the controller's schedule: after writes, every
leader.imbalance.check.interval, again at once when a run stopped at its bound)."""

from __future__ import annotations

import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.quorum.controller import ControllerResult, ControllerSettings
from pykraft.quorum.managers.leader_balance import (
    IMMEDIATE_DELAY_MS,
    ImbalanceSchedule,
    LeaderBalanceSchedule,
    imbalanced_partitions,
    maybe_balance_partition_leaders,
    preferred_leader,
)
from tests.quorum.helpers import Harness, apply, image_with, leaders, topic_id

THREE = {1: "unfenced", 2: "unfenced", 3: "unfenced"}
ROTATED = [(1, 2, 3), (2, 3, 1), (3, 1, 2), (1, 2, 3), (2, 3, 1), (3, 1, 2)]


def after_full_restart(brokers: dict[int, str] = THREE) -> MetadataImage:
    """Broker 1 came back first and leads every partition; all replicas are in the ISRs."""
    return image_with(brokers, {"t": [(replicas, (1, 2, 3), 1) for replicas in ROTATED]})


def imbalanced(image: MetadataImage) -> list[tuple[str, int]]:
    return [(ref.topic.name, ref.partition_id) for ref in imbalanced_partitions(image)]


def test_preferred_leader_is_the_first_replica() -> None:
    assert preferred_leader((3, 1, 2)) == 3
    assert preferred_leader(()) == -1


def test_imbalanced_partitions_are_those_not_led_by_their_first_replica() -> None:
    image = image_with(
        THREE,
        {
            "a": [((1, 2), (1, 2), 1), ((2, 1), (1, 2), 1)],
            "b": [((3, 1), (1,), -1), ((3, 1), (3, 1), 3)],
        },
    )
    # A leaderless partition counts too (Kafka: !hasPreferredLeader()).
    assert imbalanced(image) == sorted([("a", 1), ("b", 0)], key=lambda e: topic_id(e[0]))


def test_after_a_full_restart_every_leadership_goes_home() -> None:
    image = after_full_restart()
    result = maybe_balance_partition_leaders(image)
    assert result.response is False  # nothing left for another run
    assert all(isinstance(r, PartitionChangeRecord) for r in result.records)
    image = apply(image, result.records)
    assert leaders(image, "t") == [replicas[0] for replicas in ROTATED]
    assert imbalanced(image) == []
    # Balanced: another run writes nothing.
    assert maybe_balance_partition_leaders(image).records == ()


@pytest.mark.parametrize(
    ("brokers", "isr"),
    [
        (THREE, (1, 3)),  # the preferred replica 2 is not in the ISR
        ({1: "unfenced", 2: "fenced", 3: "unfenced"}, (1, 2, 3)),  # fenced
        ({1: "unfenced", 2: "shutdown", 3: "unfenced"}, (1, 2, 3)),  # in controlled shutdown
    ],
)
def test_no_election_to_a_preferred_replica_that_may_not_lead(
    brokers: dict[int, str], isr: tuple[int, ...]
) -> None:
    image = image_with(brokers, {"t": [((2, 1, 3), isr, 1)]})
    assert imbalanced(image) == [("t", 0)]
    assert maybe_balance_partition_leaders(image) == ControllerResult((), False)


def test_a_run_is_bounded_and_says_partitions_are_left() -> None:
    image = after_full_restart()  # partitions 1, 2, 4, 5 are imbalanced
    first = maybe_balance_partition_leaders(image, max_elections=3)
    assert (len(first.records), first.response) == (3, True)
    image = apply(image, first.records)
    second = maybe_balance_partition_leaders(image, max_elections=3)
    assert (len(second.records), second.response) == (1, False)
    assert leaders(apply(image, second.records), "t") == [1, 2, 3, 1, 2, 3]


# ---------------------------------------------------------------------- the schedule


def settings(**overrides: object) -> ControllerSettings:
    values: dict[str, object] = {
        "leader_imbalance_check_interval_ms": 1_000,
        "metadata_max_idle_interval_ms": 60_000,
        "broker_session_timeout_ms": 600_000,
    }
    values.update(overrides)
    return ControllerSettings(**values)  # type: ignore[arg-type]


def write_event(h: Harness, now_ms: int) -> None:
    """Any controller write event; here the fencing check, which finds nothing to fence."""
    assert h.controller.fence_stale_brokers(h.image, now_ms).records == ()


def test_balancing_is_due_an_interval_after_a_write_and_runs_then() -> None:
    h = Harness(after_full_restart(), now_ms=0, settings=settings())
    assert h.controller.maybe_balance_partition_leaders(h.image, 5_000) is None  # no write yet
    write_event(h, 100)
    assert h.controller.next_deadline_ms(h.image) == 1_100
    assert h.controller.maybe_balance_partition_leaders(h.image, 1_099) is None
    result = h.controller.maybe_balance_partition_leaders(h.image, 1_100)
    assert result is not None and result.response is False
    h.commit(result)
    h.controller.leader_balance.committed(result.response, 1_100)
    assert leaders(h.image, "t") == [1, 2, 3, 1, 2, 3]
    # The run is a write event itself: the next check is an interval later.
    assert h.controller.leader_balance.due_ms == 2_100


def test_a_bounded_run_is_followed_by_another_at_once() -> None:
    h = Harness(after_full_restart(), now_ms=0, settings=settings(max_elections_per_imbalance=2))
    write_event(h, 0)
    result = h.controller.maybe_balance_partition_leaders(h.image, 1_000)
    assert result is not None and (len(result.records), result.response) == (2, True)
    h.commit(result)
    h.controller.leader_balance.committed(result.response, 1_000)
    assert h.controller.next_deadline_ms(h.image) == 1_000 + IMMEDIATE_DELAY_MS
    result = h.controller.maybe_balance_partition_leaders(h.image, 1_000 + IMMEDIATE_DELAY_MS)
    assert result is not None and (len(result.records), result.response) == (2, False)
    h.commit(result)
    h.controller.leader_balance.committed(result.response, 1_000 + IMMEDIATE_DELAY_MS)
    assert leaders(h.image, "t") == [1, 2, 3, 1, 2, 3]
    assert h.controller.leader_balance.due_ms == 2_010


def test_a_run_stays_due_until_its_write_is_reported() -> None:
    # The write path retries an operation whose proposal went STALE over the newer image: the
    # retry must compute the run again, not find it done and write nothing.
    h = Harness(after_full_restart(), now_ms=0, settings=settings())
    write_event(h, 0)
    first = h.controller.maybe_balance_partition_leaders(h.image, 1_000)
    retry = h.controller.maybe_balance_partition_leaders(h.image, 1_005)
    assert first is not None and retry is not None
    assert retry.records == first.records != ()
    h.commit(retry)
    h.controller.leader_balance.committed(retry.response, 1_005)
    assert h.controller.leader_balance.due_ms == 2_005  # an interval after the run


def test_a_failed_run_comes_again_right_after_the_next_write() -> None:
    h = Harness(after_full_restart(), now_ms=0, settings=settings())
    write_event(h, 0)
    assert h.controller.maybe_balance_partition_leaders(h.image, 1_000) is not None
    h.controller.leader_balance.failed()  # e.g. NOT_CONTROLLER while proposing
    assert h.controller.leader_balance.state is ImbalanceSchedule.IMMEDIATELY
    write_event(h, 1_500)
    assert h.controller.leader_balance.due_ms == 1_500 + IMMEDIATE_DELAY_MS


def test_disabled_balancing_is_never_due() -> None:
    h = Harness(after_full_restart(), settings=settings(auto_leader_rebalance_enable=False))
    write_event(h, 0)
    assert h.controller.leader_balance.due_ms is None
    assert h.controller.next_deadline_ms(h.image) == 60_000  # only the NoOp
    assert h.controller.maybe_balance_partition_leaders(h.image, 10**9) is None


def test_writes_while_scheduled_do_not_move_the_deadline() -> None:
    schedule = LeaderBalanceSchedule(check_interval_ms=1_000)
    schedule.on_write(0)
    schedule.on_write(900)
    assert (schedule.state, schedule.due_ms) == (ImbalanceSchedule.SCHEDULED, 1_000)
    schedule.ran(more_left=False)
    assert (schedule.state, schedule.due_ms) == (ImbalanceSchedule.DEFERRED, None)
    with pytest.raises(AssertionError, match="DEFERRED -> DEFERRED"):
        schedule.ran(more_left=False)


def test_settings_refuse_a_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="leader_imbalance_check_interval_ms"):
        ControllerSettings(leader_imbalance_check_interval_ms=0)
