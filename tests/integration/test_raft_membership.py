"""Three ``MetadataRaft`` nodes in one process (pysyncobj on 127.0.0.1 ports). A static quorum
(kraft.version 0) has pysyncobj's static membership and no hooks. In a dynamic one pysyncobj's
own utility commands are refused, and membership changes go one at a time: pysyncobj 0.3.17
alone lets two changes be in flight at once — its guard reads ``__changeClusterIDx``, which
nothing sets — so ``MetadataRaft`` sets it: a second change proposed before the first commits
is refused (REQUEST_DENIED), and the voter set every node reports is the same."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import FAIL_REASON

from pykraft.free_ports import pick_free_ports
from pykraft.quorum.config import ControllerConfig, HostPort
from pykraft.quorum.raft import MetadataRaft
from pykraft.quorum.raft_dynamic import DynamicMetadataRaft, open_metadata_raft
from pykraft.quorum.voter_changes import Voter, VoterChangeKind

pytestmark = pytest.mark.integration

TIMEOUT_S = 15.0


class Quiet:
    def handle_applied(self, applied: Any) -> None:
        pass

    def handle_state_loaded(self, state: Any) -> None:
        pass

    def handle_snapshot_written(self, end_offset: int) -> None:
        pass


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[dict[int, MetadataRaft]]:
    ports = pick_free_ports(6)
    raft = {i: HostPort(host="127.0.0.1", port=ports[i - 1]) for i in (1, 2, 3)}
    started: dict[int, MetadataRaft] = {}
    try:
        for i in (1, 2, 3):
            config = ControllerConfig(
                node_id=i,
                voters={},
                bootstrap_servers=tuple(raft.values()),
                raft_listener=raft[i],
                initial_controllers=raft,
                http_listener=HostPort(host="127.0.0.1", port=ports[i + 2]),
                http_voters={},
                metadata_log_dir=tmp_path / f"c{i}",
                quorum_password="secret",
            )
            started[i] = open_metadata_raft(config, Quiet(), wall_clock_ms=lambda: 0)
        yield started
    finally:
        for node in started.values():
            node.destroy_synchronous()


def wait(condition: Any, what: str, timeout_s: float = TIMEOUT_S) -> Any:
    """``condition()`` once it is truthy, polled every 20 ms; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} not reached in {timeout_s}s")


def test_a_second_change_waits_for_the_first_to_commit(nodes: dict[int, MetadataRaft]) -> None:
    leader = wait(lambda: next((n for n in nodes.values() if n.is_leader()), None), "a leader")
    wait(lambda: leader.call_in_raft_thread(leader.voter_change_state).result()[0], "no-op")
    spare = pick_free_ports(2)
    new = [
        Voter(
            node_id=4 + index,
            directory_id="hFnSqqNsQQm7ZhaWQxTbcA",
            raft_address=HostPort(host="127.0.0.1", port=port),
        )
        for index, port in enumerate(spare)
    ]
    results: list[tuple[int, int]] = []
    current = leader.voter_set
    for voter in new:  # back to back: the second is proposed before the first commits
        leader.propose_voter_change(
            VoterChangeKind.ADD,
            voter,
            current.with_voter(voter),
            lambda _, error, node_id=voter.node_id: results.append((node_id, error)),
        )
    wait(lambda: len(results) == 2, "both answers")
    assert sorted(results) == [(4, FAIL_REASON.SUCCESS), (5, FAIL_REASON.REQUEST_DENIED)]
    for node in nodes.values():
        wait(lambda n=node: n.voter_set.node_ids == (1, 2, 3, 4), "the same voters everywhere")


def test_an_observer_never_campaigns_until_it_is_added(
    nodes: dict[int, MetadataRaft], tmp_path: Path
) -> None:
    """Kafka's observers never become candidates; a pysyncobj node outside its own voter set
    would, whenever it briefly reached a voter (which then drops the unknown peer)."""
    leader = wait(lambda: next((n for n in nodes.values() if n.is_leader()), None), "a leader")
    wait(lambda: leader.call_in_raft_thread(leader.voter_change_state).result()[0], "no-op")
    raft_port, http_port = pick_free_ports(2)
    address = HostPort(host="127.0.0.1", port=raft_port)
    config = ControllerConfig(
        node_id=4,
        voters={},
        bootstrap_servers=tuple(v.raft_address for v in leader.voter_set.voters),
        raft_listener=address,
        http_listener=HostPort(host="127.0.0.1", port=http_port),
        http_voters={},
        metadata_log_dir=tmp_path / "c4",
        quorum_password="secret",
    )
    observer = open_metadata_raft(config, Quiet(), wall_clock_ms=lambda: 0)
    try:
        time.sleep(2.5)  # over twice the election timeout
        assert observer.raftCurrentTerm == 0
        assert observer._SyncObj__raftElectionDeadline == float("inf")
        voter = Voter(node_id=4, directory_id="hFnSqqNsQQm7ZhaWQxTbcA", raft_address=address)
        done: list[int] = []
        leader.propose_voter_change(
            VoterChangeKind.ADD,
            voter,
            leader.voter_set.with_voter(voter),
            lambda _, error: done.append(error),
        )
        assert wait(lambda: done, "the change") == [FAIL_REASON.SUCCESS]
        wait(lambda: observer.voter_set.node_ids == (1, 2, 3, 4), "the observer a voter")
        wait(lambda: observer._SyncObj__raftElectionDeadline < float("inf"), "armed timer")
        assert not observer.is_leader()
    finally:
        observer.destroy_synchronous()


def test_a_static_quorum_runs_pysyncobjs_static_membership_without_hooks(tmp_path: Path) -> None:
    """kraft.version 0 (controller.quorum.voters): exactly pykraft before KIP-853."""
    port, http_port = pick_free_ports(2)
    config = ControllerConfig(
        node_id=1,
        voters={1: HostPort(host="127.0.0.1", port=port)},
        http_listener=HostPort(host="127.0.0.1", port=http_port),
        http_voters={},
        metadata_log_dir=tmp_path / "c1",
        quorum_password="secret",
    )
    node = open_metadata_raft(config, Quiet(), wall_clock_ms=lambda: 0)
    try:
        assert type(node) is MetadataRaft
        assert not node._SyncObj__conf.dynamicMembershipChange
        assert "_SyncObj__doChangeCluster" not in vars(type(node))
        with pytest.raises(Exception, match="dynamicMembershipChange is disabled"):
            node.addNodeToCluster("127.0.0.1:1")
        voter = Voter(
            node_id=2, directory_id="hFnSqqNsQQm7ZhaWQxTbcA", raft_address=config.voters[1]
        )
        with pytest.raises(AssertionError, match="static quorum"):
            node.propose_voter_change(VoterChangeKind.ADD, voter, node.voter_set, lambda *_: None)
    finally:
        node.destroy_synchronous()
    assert not (tmp_path / "c1" / "raft" / "voters.json").exists()


def test_pysyncobjs_utility_commands_are_refused(nodes: dict[int, MetadataRaft]) -> None:
    """``syncobj_admin -add/-remove/-set_version`` reach the Raft port with the quorum password
    only; they would skip every KIP-853 check (review finding 4): REQUEST_DENIED, no entry."""
    leader = wait(lambda: next((n for n in nodes.values() if n.is_leader()), None), "a leader")
    assert isinstance(leader, DynamicMetadataRaft)
    wait(lambda: leader.call_in_raft_thread(leader.voter_change_state).result()[0], "no-op")
    callbacks = leader._SyncObj__transport._onUtilityMessageCallbacks
    answers: list[Any] = []
    for command in ("add", "remove", "set_version"):
        callbacks[command](["127.0.0.1:1"], lambda result, error: answers.append(error))
    assert answers == [FAIL_REASON.REQUEST_DENIED] * 3
    # A membership entry without a voter set (pysyncobj's own shape) is refused on append too.
    done: list[int] = []
    leader.addNodeToCluster("127.0.0.1:1", callback=lambda _, error: done.append(error))
    assert wait(lambda: done, "the answer") == [FAIL_REASON.REQUEST_DENIED]
    time.sleep(0.2)
    assert all(n.voter_set.node_ids == (1, 2, 3) for n in nodes.values())


def test_a_refused_or_misplaced_change_leaves_no_trace(nodes: dict[int, MetadataRaft]) -> None:
    """Review finding 3: only the leader appends a change, on its Raft thread (pysyncobj would
    forward a queued one to the next leader, possibly the voter it removes, which refuses it
    and yet marked itself an observer); a refused change changes nothing anywhere."""
    leader = wait(lambda: next((n for n in nodes.values() if n.is_leader()), None), "a leader")
    wait(lambda: leader.call_in_raft_thread(leader.voter_change_state).result()[0], "no-op")
    follower = next(n for n in nodes.values() if n is not leader)
    leader_id = next(i for i, n in nodes.items() if n is leader)
    answers: list[int] = []
    me = leader.voter_set.get(leader_id)
    assert me is not None
    # The leader naming itself, and a follower asked to append: both refused at once.
    leader.propose_voter_change(
        VoterChangeKind.REMOVE,
        me,
        leader.voter_set.without(leader_id),
        lambda _, e: answers.append(e),
    )
    follower.propose_voter_change(
        VoterChangeKind.REMOVE,
        me,
        leader.voter_set.without(leader_id),
        lambda _, e: answers.append(e),
    )
    wait(lambda: len(answers) == 2, "both answers")
    assert sorted(answers) == sorted([FAIL_REASON.REQUEST_DENIED, FAIL_REASON.NOT_LEADER])
    time.sleep(0.3)
    for node in nodes.values():
        assert node.voter_set.node_ids == (1, 2, 3) and node.membership.is_voter
        assert node.membership.uncommitted == []
    assert leader.call_in_raft_thread(leader.voter_change_state).result() == (True, True)


def test_a_new_leader_is_not_blocked_by_a_truncated_changes_index(
    nodes: dict[int, MetadataRaft],
) -> None:
    """Review finding 7: ``__changeClusterIDx`` of a change that was truncated (an index this
    log may not reach for long) is cleared when a node becomes leader; the new term's no-op
    fences every earlier change, so the new leader accepts changes once it is applied."""
    leader = wait(lambda: next((n for n in nodes.values() if n.is_leader()), None), "a leader")
    wait(lambda: leader.call_in_raft_thread(leader.voter_change_state).result()[0], "no-op")
    for node in nodes.values():
        far = functools.partial(setattr, node, "_SyncObj__changeClusterIDx", 10**9)
        node.call_in_raft_thread(far).result(5)
    leader.call_in_raft_thread(leader.transferLeadership).result(5)
    new_leader = wait(
        lambda: next((n for n in nodes.values() if n.is_leader() and n is not leader), None),
        "a new leader",
    )

    def ready() -> tuple[bool, bool] | None:
        state: tuple[bool, bool] = new_leader.call_in_raft_thread(
            new_leader.voter_change_state
        ).result(5)
        return state if all(state) else None

    assert wait(ready, "the new leader ready for a change") == (True, True)
