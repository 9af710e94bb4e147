"""How a controller follows the voter set through pysyncobj's membership entries, dumps and
restarts (quorum/raft_voters.py). The membership requests are pysyncobj's own shape,
``[kind, node id, node]``, as ``SyncObj.__doChangeCluster`` receives them."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.node import TCPNode

from pykraft.quorum.config import ControllerConfig, ControllerConfigError, HostPort
from pykraft.quorum.raft_dump import DumpHeader, RaftEntry, read_dump, write_dump
from pykraft.quorum.raft_voters import (
    VOTER_SET_ATTRIBUTE,
    RaftMembership,
    VotersFileError,
    members_of_latest_change,
    read_voters_file,
    static_voters,
    voter_set_to_text,
    write_voters_file,
)
from pykraft.quorum.voter_changes import NO_DIRECTORY_ID, Voter, VoterSet

DIR_4 = "hFnSqqNsQQm7ZhaWQxTbcA"


def raft(node_id: int) -> HostPort:
    return HostPort(host="127.0.0.1", port=9090 + node_id)


def config(
    tmp_path: Path, node_id: int = 1, *, observer: bool = False, static: bool = False
) -> ControllerConfig:
    """A dynamic quorum's controller (kraft.version 1): a founding voter of {1, 2, 3}, or an
    observer; ``static``: controller.quorum.voters (kraft.version 0)."""
    common: dict[str, Any] = {
        "node_id": node_id,
        "http_listener": HostPort(host="127.0.0.1", port=19090 + node_id),
        "http_voters": {2: HostPort(host="127.0.0.1", port=19092)},
        "metadata_log_dir": tmp_path,
        "quorum_password": "secret",
    }
    if observer:
        return ControllerConfig(
            voters={},
            bootstrap_servers=(raft(1), raft(2)),
            raft_listener=raft(node_id),
            **common,
        )
    if static:
        return ControllerConfig(voters={n: raft(n) for n in (1, 2, 3)}, **common)
    return ControllerConfig(
        voters={},
        bootstrap_servers=(raft(1), raft(2), raft(3)),
        raft_listener=raft(node_id),
        initial_controllers={n: raft(n) for n in (1, 2, 3)},
        **common,
    )


VOTER_4 = Voter(node_id=4, directory_id=DIR_4, raft_address=raft(4))


def entry(kind: str, voter: Voter, new_set: VoterSet) -> list[Any]:
    node = TCPNode(str(voter.raft_address), **{VOTER_SET_ATTRIBUTE: voter_set_to_text(new_set)})
    return [kind, node.id, node]


def addresses(*node_ids: int) -> set[str]:
    return {str(raft(n)) for n in node_ids}


def test_a_static_quorum_ignores_a_voters_file_and_never_writes_one(tmp_path: Path) -> None:
    """kraft.version 0: controller.quorum.voters is the voter set, whatever a file says (a
    voters.json left by a dynamic run must not override the static configuration)."""
    write_voters_file(tmp_path / "voters.json", VoterSet.of([VOTER_4]), False)
    membership = RaftMembership(config(tmp_path, static=True), tmp_path)
    assert membership.voter_set == static_voters(config(tmp_path, static=True))
    assert membership.is_voter and not membership.dynamic
    assert sorted(membership.initial_others) == sorted(addresses(2, 3))


def test_founding_voters_seed_the_members_and_the_dump_list_is_ignored(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    assert membership.voter_set == static_voters(config(tmp_path))
    assert membership.voter_set.get(2) == Voter(
        node_id=2,
        directory_id=NO_DIRECTORY_ID,
        raft_address=raft(2),
        http_listener=HostPort(host="127.0.0.1", port=19092),
    )
    assert sorted(membership.initial_others) == sorted(addresses(2, 3))
    assert membership.is_voter and not membership.dynamic
    # A dump written with other addresses (an operator edited controller.quorum.voters while
    # the quorum was down): the static configuration stays authoritative.
    others = membership.handle_dump((), False, ("127.0.0.1:1", "127.0.0.1:2"))
    assert sorted(others) == sorted(addresses(2, 3))
    assert not (tmp_path / "voters.json").exists()


def test_a_change_is_followed_persisted_and_is_the_base_after_a_restart(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    two = membership.voter_set.without(3)
    voter_3 = membership.voter_set.get(3)
    assert voter_3 is not None
    membership.handle_change(entry("rem", voter_3, two), False, addresses(2))
    assert membership.voter_set.node_ids == (1, 2)
    three = two.with_voter(VOTER_4)
    membership.handle_change(entry("add", VOTER_4, three), False, addresses(2, 4))
    assert membership.voter_set == three
    assert read_voters_file(tmp_path / "voters.json") == (three, True)
    restarted = RaftMembership(config(tmp_path), tmp_path)
    assert restarted.dynamic and restarted.voter_set == three
    assert sorted(restarted.initial_others) == sorted(addresses(2, 4))
    # A dump now sets the members (pysyncobj's list, this node left out).
    assert restarted.handle_dump((), True, tuple(sorted(addresses(1, 2, 4)))) == sorted(
        addresses(2, 4)
    )


def test_a_truncated_change_is_undone(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    before = membership.voter_set
    added = entry("add", VOTER_4, before.with_voter(VOTER_4))
    membership.handle_change(added, False, addresses(2, 3, 4))
    assert membership.voter_set.node_ids == (1, 2, 3, 4)
    membership.handle_change(added, True, addresses(2, 3))
    assert membership.voter_set == before


def test_an_observer_learns_every_voter_from_the_entry_that_adds_it(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path, 4, observer=True), tmp_path)
    assert membership.initial_others == [str(raft(1)), str(raft(2))]
    assert not membership.is_voter and membership.voter_set == VoterSet(())
    leader_view = static_voters(config(tmp_path)).without(3).with_voter(VOTER_4)
    membership.handle_change(entry("add", VOTER_4, leader_view), False, addresses(1, 2))
    assert membership.is_voter
    assert membership.voter_set == leader_view
    assert read_voters_file(tmp_path / "voters.json") == (leader_view, True)


def test_an_observer_caught_up_by_a_dump_takes_its_members(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path, 4, observer=True), tmp_path)
    leader_view = static_voters(config(tmp_path)).without(3).with_voter(VOTER_4)
    others = membership.handle_dump(leader_view.voters, True, tuple(sorted(addresses(1, 2, 4))))
    assert sorted(others) == sorted(addresses(1, 2))
    membership.handle_members(set(others))
    assert membership.is_voter and membership.voter_set == leader_view


def test_a_member_without_a_known_id_is_left_out(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    membership.handle_members(addresses(2, 3) | {"127.0.0.1:1"})
    assert membership.voter_set.node_ids == (1, 2, 3)


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"version": 2, "is_voter": true, "voters": []}',
        b'{"version": 1, "is_voter": 1, "voters": []}',
        b'{"version": 1, "is_voter": true, "voters": [{"node_id": 1}]}',
    ],
)
def test_a_damaged_voters_file_is_refused_loudly(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "voters.json").write_bytes(content)
    with pytest.raises(VotersFileError):
        RaftMembership(config(tmp_path), tmp_path)


def test_voters_file_round_trip(tmp_path: Path) -> None:
    voters = static_voters(config(tmp_path)).with_voter(VOTER_4)
    write_voters_file(tmp_path / "v.json", voters, False)
    assert read_voters_file(tmp_path / "v.json") == (voters, False)
    assert read_voters_file(tmp_path / "missing.json") is None


def test_the_dump_header_carries_the_voter_set(tmp_path: Path) -> None:
    voters = static_voters(config(tmp_path)).with_voter(VOTER_4)
    header = DumpHeader(
        next_offset=0,
        last_raft_index=1,
        epoch=0,
        last_entry=RaftEntry(command=b"x", index=2, term=1),
        prev_entry=RaftEntry(command=b"y", index=1, term=1),
        voters=tuple(sorted(addresses(1, 2, 3, 4))),
        checkpoint_name=None,
        checkpoint_size=0,
        voter_set=voters.voters,
        dynamic_voters=True,
    )
    write_dump(tmp_path / "dump.bin", header, None)
    assert read_dump(tmp_path / "dump.bin")[0] == header


def test_observer_configuration(tmp_path: Path) -> None:
    observer = config(tmp_path, 4, observer=True)
    assert observer.self_raft_address == raft(4)
    with pytest.raises(ControllerConfigError, match="RAFT://"):
        ControllerConfig(
            node_id=4,
            voters={},
            bootstrap_servers=(raft(1),),
            http_listener=raft(9),
            http_voters={},
            metadata_log_dir=tmp_path,
            quorum_password="x",
        )
    with pytest.raises(ControllerConfigError, match="must be set"):
        ControllerConfig(
            node_id=4,
            voters={},
            http_listener=raft(9),
            http_voters={},
            metadata_log_dir=tmp_path,
            quorum_password="x",
        )
    with pytest.raises(ControllerConfigError, match="exclusive"):
        ControllerConfig(
            node_id=1,
            voters={1: raft(1)},
            bootstrap_servers=(raft(1),),
            http_listener=raft(9),
            http_voters={},
            metadata_log_dir=tmp_path,
            quorum_password="x",
        )
    with pytest.raises(ControllerConfigError, match="RAFT://"):
        ControllerConfig(
            node_id=1,
            voters={1: raft(1)},
            raft_listener=raft(2),
            http_listener=raft(9),
            http_voters={},
            metadata_log_dir=tmp_path,
            quorum_password="x",
        )


def journal_entry(kind: str, voter: Voter, new_set: VoterSet, index: int) -> tuple[bytes, int, int]:
    """A journal entry as pysyncobj writes a membership change: type byte 2, then the pickle."""
    return (bytes([2]) + pickle.dumps(entry(kind, voter, new_set)), index, 1)


def test_the_journals_last_change_is_the_voter_set_after_a_restart(tmp_path: Path) -> None:
    """Raft's rule: the latest voter set in the log wins, committed or not; replaying the
    committed ``add 4`` over a list that already lacks 4 (after the later ``remove 4``) would
    bring 4 back."""
    three = static_voters(config(tmp_path))
    four = three.with_voter(VOTER_4)
    journal = [
        (bytes([1]), 1, 1),  # a no-op
        journal_entry("add", VOTER_4, four, 5),
        (bytes([0]) + b"regular", 6, 1),
        journal_entry("rem", VOTER_4, three, 7),
        (bytes([0]) + b"regular", 8, 1),
    ]
    assert members_of_latest_change(journal) == frozenset(addresses(1, 2, 3))
    assert members_of_latest_change(journal[:3]) == frozenset(addresses(1, 2, 3, 4))
    assert members_of_latest_change([(bytes([1]), 1, 1)]) is None
    assert members_of_latest_change([(bytes([2]) + b"not a pickle", 3, 1)]) is None
