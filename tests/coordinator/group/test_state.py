"""One group's state machine and protocol selection, after Kafka's ``GroupMetadataTest``."""

from __future__ import annotations

import pytest

from pykraft.coordinator.group.state import (
    VALID_PREVIOUS_STATES,
    GroupMetadata,
    GroupState,
    IllegalGroupStateTransition,
    MemberMetadata,
    Protocol,
)

E, PR, CR, S, D = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


def group_in(state: GroupState) -> GroupMetadata:
    """A group driven to ``state`` through legal transitions only."""
    group = GroupMetadata("g", E, now_ms=0)
    path = {E: [], PR: [PR], CR: [PR, CR], S: [PR, CR, S], D: [D]}[state]
    for step in path:
        group.transition_to(step, now_ms=1)
    return group


def member(member_id: str, *protocols: str) -> MemberMetadata:
    return MemberMetadata(
        member_id=member_id,
        client_id="client",
        client_host="/127.0.0.1",
        rebalance_timeout_ms=30_000,
        session_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=tuple(Protocol(name, name.encode()) for name in protocols),
    )


# GroupMetadataTest: test<From>To<To>Transition / IllegalTransition, every pair.
@pytest.mark.parametrize(
    ("source", "target", "legal"),
    [
        (S, PR, True),  # testStableToPreparingRebalanceTransition
        (S, D, True),  # testStableToDeadTransition
        (CR, PR, True),  # testAwaitingRebalanceToPreparingRebalanceTransition
        (PR, D, True),  # testPreparingRebalanceToDeadTransition
        (PR, E, True),  # testPreparingRebalanceToEmptyTransition
        (E, D, True),  # testEmptyToDeadTransition
        (CR, S, True),  # testAwaitingRebalanceToStableTransition
        (E, PR, True),
        (PR, CR, True),
        (CR, D, True),
        (D, D, True),  # Dead's validPreviousStates include Dead (Kafka 3.x)
        (E, S, False),  # testEmptyToStableIllegalTransition
        (S, S, False),  # testStableToStableIllegalTransition
        (E, CR, False),  # testEmptyToAwaitingRebalanceIllegalTransition
        (PR, PR, False),  # testPreparingRebalanceToPreparingRebalanceIllegalTransition
        (PR, S, False),  # testPreparingRebalanceToStableIllegalTransition
        (CR, CR, False),  # testAwaitingRebalanceToAwaitingRebalanceIllegalTransition
        (D, E, False),
        (D, PR, False),
        (D, S, False),
        (S, E, False),
        (CR, E, False),
        (E, E, False),
    ],
)
def test_transitions(source: GroupState, target: GroupState, legal: bool) -> None:
    group = group_in(source)
    if legal:
        group.transition_to(target, now_ms=7)
        assert group.state is target and group.state_timestamp_ms == 7
    else:
        with pytest.raises(IllegalGroupStateTransition, match=f"{target.value}.*{source.value}"):
            group.transition_to(target, now_ms=7)
        assert group.state is source


def test_every_pair_is_decided_by_the_table() -> None:
    for target, sources in VALID_PREVIOUS_STATES.items():
        for source in GroupState:
            group = group_in(source)
            if source in sources:
                group.transition_to(target, now_ms=1)
            else:
                with pytest.raises(IllegalGroupStateTransition):
                    group.transition_to(target, now_ms=1)


@pytest.mark.parametrize(
    ("state", "can"), [(E, True), (S, True), (CR, True), (PR, False), (D, False)]
)
def test_can_rebalance(state: GroupState, can: bool) -> None:
    # testCanRebalanceWhenStable, ...WhenAwaitingSync, testCannotRebalanceWhenPreparingRebalance,
    # testCannotRebalanceWhenDead
    assert group_in(state).can_rebalance() is can


def test_select_protocol_most_votes() -> None:
    # GroupMetadataTest.testSelectProtocol
    group = group_in(PR)
    group.add(member("a", "range", "roundrobin"))
    group.add(member("b", "roundrobin", "range"))
    assert group.select_protocol() == "range"  # a tie: the first member's preference
    group.add(member("c", "roundrobin", "range"))
    assert group.select_protocol() == "roundrobin"
    group.remove("c")
    group.remove("a")
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_chooses_a_common_protocol() -> None:
    # GroupMetadataTest.testSelectProtocolChoosesCompatibleProtocol
    group = group_in(PR)
    group.add(member("a", "range", "roundrobin"))
    group.add(member("b", "another", "roundrobin"))
    assert group.select_protocol() == "roundrobin"


def test_select_protocol_of_no_members_is_a_bug() -> None:
    # GroupMetadataTest.testSelectProtocolRaisesIfNoMembers
    with pytest.raises(AssertionError):
        group_in(PR).select_protocol()


def test_supports_protocols() -> None:
    # GroupMetadataTest.testSupportsProtocols
    group = group_in(E)
    assert group.supports_protocols("consumer", (Protocol("range", b""),))
    assert not group.supports_protocols("", (Protocol("range", b""),))
    assert not group.supports_protocols("consumer", ())
    group.transition_to(PR, now_ms=1)
    group.add(member("a", "range", "roundrobin"))
    assert group.protocol_type == "consumer"
    assert group.supports_protocols("consumer", (Protocol("roundrobin", b""),))
    assert not group.supports_protocols("consumer", (Protocol("sticky", b""),))
    assert not group.supports_protocols("connect", (Protocol("range", b""),))
    group.add(member("b", "roundrobin"))
    assert not group.supports_protocols("consumer", (Protocol("range", b""),))
    assert group.supports_protocols("consumer", (Protocol("roundrobin", b""),))


def test_leader_moves_to_the_next_member_when_it_leaves() -> None:
    group = group_in(PR)
    group.add(member("a", "range"))
    group.add(member("b", "range"))
    assert group.leader_id == "a"
    group.remove("a")
    assert group.leader_id == "b"
    group.remove("b")
    assert group.leader_id is None


def test_elect_a_joined_leader_when_the_leader_did_not_rejoin() -> None:
    group = group_in(PR)
    a, b = member("a", "range"), member("b", "range")
    group.add(a)
    group.add(b)
    assert not group.maybe_elect_new_joined_leader()  # nobody waits in a JoinGroup
    b.join_request = 9
    assert group.maybe_elect_new_joined_leader() and group.leader_id == "b"
    assert not group.has_all_members_joined()
    a.join_request = 10
    assert group.has_all_members_joined()


def test_init_next_generation() -> None:
    group = group_in(PR)
    group.add(member("a", "range"))
    group.init_next_generation(now_ms=5)
    assert (group.state, group.generation_id, group.protocol_name) == (CR, 1, "range")
    group.transition_to(PR, now_ms=6)
    group.remove("a")
    group.init_next_generation(now_ms=7)
    assert (group.state, group.generation_id, group.protocol_name) == (E, 2, None)
