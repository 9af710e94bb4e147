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
    read_voters_file,
    static_voters,
    uncommitted_voter_sets,
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
    assert membership.is_voter and membership.uncommitted == []
    assert sorted(membership.initial_others) == sorted(addresses(2, 3))


def test_founding_voters_seed_the_members(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    assert membership.voter_set == membership.committed == static_voters(config(tmp_path))
    assert membership.voter_set.get(2) == Voter(
        node_id=2,
        directory_id=NO_DIRECTORY_ID,
        raft_address=raft(2),
        http_listener=HostPort(host="127.0.0.1", port=19092),
    )
    assert sorted(membership.initial_others) == sorted(addresses(2, 3))
    assert membership.is_voter
    assert not (tmp_path / "voters.json").exists()


def test_a_committed_change_is_persisted_and_is_the_base_after_a_restart(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    two = membership.voter_set.without(3)
    voter_3 = membership.voter_set.get(3)
    assert voter_3 is not None
    removal = entry("rem", voter_3, two)
    membership.handle_appended(removal)
    assert membership.voter_set.node_ids == (1, 2) and membership.committed.node_ids == (1, 2, 3)
    assert not (tmp_path / "voters.json").exists()  # not committed yet
    membership.handle_committed(removal)
    three = two.with_voter(VOTER_4)
    addition = entry("add", VOTER_4, three)
    membership.handle_appended(addition)
    membership.handle_committed(addition)
    assert membership.voter_set == membership.committed == three
    assert membership.uncommitted == []
    assert read_voters_file(tmp_path / "voters.json") == (three, True)
    restarted = RaftMembership(config(tmp_path), tmp_path)
    assert restarted.voter_set == three
    assert sorted(restarted.initial_others) == sorted(addresses(2, 4))


def test_a_truncated_change_is_undone(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path), tmp_path)
    before = membership.voter_set
    added = entry("add", VOTER_4, before.with_voter(VOTER_4))
    membership.handle_appended(added)
    assert membership.voter_set.node_ids == (1, 2, 3, 4)
    assert sorted(membership.members()) == sorted(addresses(2, 3, 4))
    membership.handle_truncated(added)
    assert membership.voter_set == before
    assert sorted(membership.members()) == sorted(addresses(2, 3))


def test_a_dump_taken_mid_change_carries_the_committed_set(tmp_path: Path) -> None:
    """Review finding 1 (/tmp/rev3/repro.py b): leader 1 of {1, 2, 3} appends ``rem 3``, a dump
    is taken before it commits, a new leader truncates it, and 1 restarts from the dump. Kafka:
    the snapshot holds ``voterSetAtOffset(snapshot offset)``; here the dump holds ``committed``
    ({1, 2, 3}), never the uncommitted {1, 2}, so 1 counts 3's vote again."""
    membership = RaftMembership(config(tmp_path), tmp_path)
    voter_3 = membership.voter_set.get(3)
    assert voter_3 is not None
    removal = entry("rem", voter_3, membership.voter_set.without(3))
    membership.handle_appended(removal)
    dumped = membership.committed.voters  # what _prepare_dump writes
    assert [v.node_id for v in dumped] == [1, 2, 3]
    membership.handle_truncated(removal)
    restarted = RaftMembership(config(tmp_path), tmp_path)
    others = restarted.handle_dump(dumped)
    restarted.handle_journal([])  # the journal lost ``rem 3`` with the truncation
    assert restarted.voter_set.node_ids == (1, 2, 3)
    assert sorted(others) == sorted(restarted.members()) == sorted(addresses(2, 3))


def test_every_entry_sets_the_whole_voter_set_never_a_delta(tmp_path: Path) -> None:
    """Review finding 2: observer 4 bootstrapped from a subset {1, 2} of the voters; the entry
    adding it names {1, 2, 3, 4}, and that whole set is what it counts (Kafka's
    ``voterSetHistory.addAt(VoterSet.fromVotersRecord(..))``), not {1, 2} + 4."""
    membership = RaftMembership(config(tmp_path, 4, observer=True), tmp_path)
    assert membership.initial_others == [str(raft(1)), str(raft(2))]
    assert not membership.is_voter and membership.voter_set == VoterSet(())
    leader_view = static_voters(config(tmp_path)).with_voter(VOTER_4)
    membership.handle_appended(entry("add", VOTER_4, leader_view))
    assert membership.is_voter and membership.voter_set == leader_view
    assert sorted(membership.members()) == sorted(addresses(1, 2, 3))
    assert not (tmp_path / "voters.json").exists()
    membership.handle_committed(entry("add", VOTER_4, leader_view))
    assert read_voters_file(tmp_path / "voters.json") == (leader_view, True)


def test_an_observer_caught_up_by_a_dump_takes_its_committed_set(tmp_path: Path) -> None:
    membership = RaftMembership(config(tmp_path, 4, observer=True), tmp_path)
    committed = static_voters(config(tmp_path))
    others = membership.handle_dump(committed.voters)
    assert sorted(others) == sorted(addresses(1, 2, 3))
    assert not membership.is_voter and membership.voter_set == committed
    # An empty dump set (a dump of no voter set) leaves the bootstrap servers.
    fresh = RaftMembership(config(tmp_path / "x", 5, observer=True), tmp_path)
    assert fresh.handle_dump(()) == [str(raft(1)), str(raft(2))]


@pytest.mark.parametrize(
    ("kind", "voter_id", "new_ids", "valid"),
    [
        ("add", 4, (1, 2, 3, 4), True),
        ("rem", 3, (1, 2), True),
        ("rem", 1, (2, 3), False),  # the leader itself: pysyncobj's leader cannot remove itself
        ("add", 4, (1, 2, 4), False),  # two voters at once
        ("add", 4, (1, 2, 3), False),  # the named voter is not in the new set
        ("rem", 3, (1, 2, 3), False),
        ("rem", 7, (1, 2, 3), False),  # not a voter
        ("add", 4, None, False),  # pysyncobj's own entry: no voter set
    ],
)
def test_the_leader_appends_only_one_voter_more_or_less(
    tmp_path: Path, kind: str, voter_id: int, new_ids: tuple[int, ...] | None, valid: bool
) -> None:
    """Review finding 3: a refused change leaves no trace, so the leader checks it before the
    append (``is_valid_change``) and only an accepted one reaches ``handle_appended``."""
    membership = RaftMembership(config(tmp_path), tmp_path)
    every = {v.node_id: v for v in static_voters(config(tmp_path)).with_voter(VOTER_4).voters}
    every[7] = Voter(node_id=7, directory_id=DIR_4, raft_address=raft(7))
    named = every[voter_id]
    if new_ids is None:
        request: list[Any] = [kind, str(named.raft_address), TCPNode(str(named.raft_address))]
    else:
        request = entry(kind, named, VoterSet.of([every[i] for i in new_ids]))
    assert membership.is_valid_change(request) is valid
    assert membership.voter_set.node_ids == (1, 2, 3) and membership.uncommitted == []


def test_a_refused_change_naming_this_node_leaves_it_a_voter(tmp_path: Path) -> None:
    """Review finding 3 (/tmp/rev3/repro.py a): bookkeeping only follows appended entries; a
    truncation this node never appended is logged and ignored."""
    membership = RaftMembership(config(tmp_path), tmp_path)
    removal = entry("rem", membership.voter_set.get(1), membership.voter_set.without(1))  # type: ignore[arg-type]
    membership.handle_truncated(removal)
    assert membership.is_voter and membership.voter_set.node_ids == (1, 2, 3)
    assert not (tmp_path / "voters.json").exists()


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


def test_the_journals_uncommitted_changes_come_after_the_committed_set(tmp_path: Path) -> None:
    """At start-up the committed entries are re-applied in order (each a whole set, so the
    replay never passes through a delta) and the entries after the last applied one are the
    uncommitted history, the latest of which wins (Raft's rule, Kafka's
    ``KRaftControlRecordStateMachine``)."""
    three = static_voters(config(tmp_path))
    four = three.with_voter(VOTER_4)
    journal = [
        (bytes([1]), 1, 1),  # a no-op
        journal_entry("add", VOTER_4, four, 5),
        (bytes([0]) + b"regular", 6, 1),
        journal_entry("rem", VOTER_4, three, 7),
        (bytes([0]) + b"regular", 8, 1),
        (bytes([2]) + b"not a pickle", 9, 1),
    ]
    assert uncommitted_voter_sets(journal, 8) == []  # no pickle: pysyncobj never applied it
    assert uncommitted_voter_sets(journal, 6) == [three]
    assert uncommitted_voter_sets(journal, 4) == [four, three]
    membership = RaftMembership(config(tmp_path), tmp_path)
    membership.handle_committed(entry("add", VOTER_4, four))  # replayed: committed up to 5
    membership.handle_journal(uncommitted_voter_sets(journal, 5))
    assert membership.committed == four and membership.voter_set == three
    membership.handle_committed(entry("rem", VOTER_4, three))
    assert membership.committed == membership.voter_set == three and membership.uncommitted == []
