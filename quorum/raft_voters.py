"""Where the controller quorum's voter set lives, and how every controller keeps it (KIP-853).

Kafka writes the voter set into the metadata log as ``VotersRecord`` control records; a replica
uses the latest one in its log, committed or not. pykraft's Raft is pysyncobj, whose dynamic
membership (``SyncObjConf.dynamicMembershipChange``) already is that design: a change is a
MEMBERSHIP entry of its own log, applied by the leader when it appends it and by a follower when
it receives it, undone if the entry is truncated, and carried in the full dump (pysyncobj's
snapshot). The voter set therefore lives in pysyncobj's
log — the one place where a change commits with the quorum that must agree on it — not in our
metadata records, which would be a second Raft entry that could commit without the first.

pysyncobj knows members only by Raft address. Each membership entry pykraft proposes carries the
whole new voter set (ids, directory ids, HTTP listeners) on the entry's node as ``voter_set``,
like Kafka's ``VotersRecord``, and every replica applies that whole set, never a delta:
``RaftMembership`` keeps Kafka's ``VoterSetHistory`` — the committed set (the last membership
entry applied, in commit order: ``KRaftControlRecordStateMachine``) and the sets of the entries
appended after it, popped again if they are truncated (``truncateNewEntries``). The latest set
is what pysyncobj counts (``quorum/raft_voter_hooks.py`` sets its members from it); a dump
carries the committed set at its last entry, as Kafka's snapshot carries
``voterSetAtOffset(snapshot offset)``, never an uncommitted one.

At start-up: the voters file (the last committed set this node applied) or the founding voters
(``pykraft.quorum.initial.controllers``), then the dump's committed set, then the journal's
committed membership entries re-applied in order, then its uncommitted ones
(``uncommitted_voter_sets``) on the first tick. A static quorum (kraft.version 0) uses none of
this: ``controller.quorum.voters`` is its voter set.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pykraft.quorum.config import ControllerConfig, HostPort
from pykraft.quorum.voter_changes import (
    NO_DIRECTORY_ID,
    Voter,
    VoterSet,
    voter_from_json,
    voter_to_json,
)

logger = logging.getLogger(__name__)

VOTERS_FILE_NAME = "voters.json"
VOTERS_FILE_VERSION = 1
# The voters file is a few lines; bound what is read (STYLE.md §7).
MAX_VOTERS_FILE_BYTES = 1 << 20
# The attribute of a membership entry's node carrying the new voter set (JSON text).
VOTER_SET_ATTRIBUTE = "voter_set"


# pysyncobj's command type byte of a membership entry (``syncobj._COMMAND_TYPE.MEMBERSHIP``).
MEMBERSHIP_COMMAND = 2


def entry_voter_set(request: Any) -> VoterSet | None:
    """The whole voter set a membership entry (``[kind, node id, node]``) carries, or None when
    it carries none or a malformed one (pysyncobj's own ``syncobj_admin`` entries)."""
    node = request[2] if isinstance(request, list | tuple) and len(request) >= 3 else None
    text = getattr(node, VOTER_SET_ATTRIBUTE, None)
    if type(text) is not str:
        return None
    try:
        return voter_set_from_text(text)
    except (ValueError, AssertionError):
        logger.error("membership entry with a malformed voter set: %.200s", text)
        return None


def parse_membership_command(command: bytes) -> Any:
    """A journal command's membership request, or None for any other command. The entry is
    pickled by pysyncobj itself; it came from this node or an authenticated peer
    (``quorum/raft_transport.py``)."""
    if command[:1] != bytes([MEMBERSHIP_COMMAND]):
        return None
    try:
        return pickle.loads(command[1:])
    except Exception:
        return None


def uncommitted_voter_sets(journal: Sequence[Any], last_applied: int) -> list[VoterSet | None]:
    """The voter sets of the membership entries after ``last_applied`` in pysyncobj's journal
    (entries are ``(command, index, term)``), oldest first; None for an entry without one."""
    found: list[VoterSet | None] = []
    for position in range(len(journal) - 1, -1, -1):
        command, index, _ = journal[position]
        if index <= last_applied:
            break
        request = parse_membership_command(command)
        if request is not None:
            found.append(entry_voter_set(request))
    return found[::-1]


class VotersFileError(ValueError):
    """The voters file is unreadable or malformed; the message names it."""


def voter_set_to_text(voter_set: VoterSet) -> str:
    return json.dumps([voter_to_json(v) for v in voter_set.voters], separators=(",", ":"))


def voter_set_from_text(text: str) -> VoterSet:
    """Raises ``ValueError``."""
    document = json.loads(text)
    if type(document) is not list:
        raise ValueError("a voter set must be a list")
    return VoterSet.of([voter_from_json(item) for item in document])


def static_voters(config: ControllerConfig) -> VoterSet:
    """``controller.quorum.voters``, or a dynamic quorum's founding voters
    (``pykraft.quorum.initial.controllers``), with ``controller.quorum.http.voters``, as voters
    whose directory ids are unknown; empty for an observer."""
    http = {**config.http_voters, config.node_id: config.http_listener}
    founders = config.voters or config.initial_controllers
    return VoterSet.of(
        [
            Voter(
                node_id=node_id,
                directory_id=NO_DIRECTORY_ID,
                raft_address=address,
                http_listener=http.get(node_id),
            )
            for node_id, address in founders.items()
        ]
    )


def read_voters_file(path: Path) -> tuple[VoterSet, bool] | None:
    """The voter set and whether this node is in it, or None without a file."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_VOTERS_FILE_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise VotersFileError(f"{path}: {error.strerror}") from None
    try:
        if len(data) > MAX_VOTERS_FILE_BYTES:
            raise ValueError("too large")
        document = json.loads(data)
        if type(document) is not dict or document.get("version") != VOTERS_FILE_VERSION:
            raise ValueError(f"not a version {VOTERS_FILE_VERSION} voters file")
        is_voter = document.get("is_voter")
        if type(is_voter) is not bool or type(document.get("voters")) is not list:
            raise ValueError("malformed")
        voters = VoterSet.of([voter_from_json(item) for item in document["voters"]])
    except (ValueError, AssertionError) as error:
        raise VotersFileError(f"{path}: {error}") from None
    return voters, is_voter


def write_voters_file(path: Path, voter_set: VoterSet, is_voter: bool) -> None:
    document = {
        "version": VOTERS_FILE_VERSION,
        "is_voter": is_voter,
        "voters": [voter_to_json(v) for v in voter_set.voters],
    }
    temp = path.with_name(path.name + ".tmp")
    with open(temp, "wb") as out:
        out.write((json.dumps(document, indent=1) + "\n").encode())
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class RaftMembership:
    """The voter set as this controller's log has it, as Kafka's ``VoterSetHistory`` keeps it:
    ``committed`` is the set of the last membership entry applied (commit order, or the dump's);
    every membership entry appended after it pushes its whole set on ``uncommitted``, a
    truncation pops it, its commit moves it to ``committed``. The latest set (``voter_set``) is
    the last uncommitted one, else the committed one, and is what pysyncobj counts.

    Only the Raft thread calls the ``handle_*`` methods; ``voter_set`` / ``committed`` /
    ``is_voter`` are immutable values for any thread. The voters file holds ``committed``."""

    def __init__(self, config: ControllerConfig, raft_dir: Path) -> None:
        self._path = raft_dir / VOTERS_FILE_NAME
        self._self_address = str(config.self_raft_address)
        self._node_id = config.node_id
        # A static quorum (kraft.version 0) has controller.quorum.voters and nothing else.
        stored = read_voters_file(self._path) if config.kraft_version == 1 else None
        base = stored[0] if stored is not None else static_voters(config)
        self.committed: VoterSet = base
        # Invariant: the sets of the membership entries after the last applied one, in log order.
        self.uncommitted: list[VoterSet] = []
        self.voter_set: VoterSet = base
        self.is_voter = base.by_raft_address(self._self_address) is not None
        # Until the log names any voter (an observer never added), pysyncobj's members are the
        # voters it follows: controller.quorum.bootstrap.servers.
        self._bootstrap = [str(address) for address in config.bootstrap_servers]
        self.initial_others: list[str] = self.members()

    def members(self) -> list[str]:
        """pysyncobj's other members: the latest voter set without this node."""
        if not self.voter_set.voters:
            return [address for address in self._bootstrap if address != self._self_address]
        return [
            str(voter.raft_address)
            for voter in self.voter_set.voters
            if str(voter.raft_address) != self._self_address
        ]

    def is_valid_change(self, request: Any) -> bool:
        """The leader's check before it appends a change: the entry's set is the latest set
        with the named voter added or removed, one voter at a time (Kafka's ``VoterSet.addVoter``
        / ``removeVoter``), and still holds this node (pysyncobj's leader cannot remove itself)."""
        new_set = entry_voter_set(request)
        if new_set is None or new_set.by_raft_address(self._self_address) is None:
            return False
        kind = request[0]
        address = str(getattr(request[2], "address", ""))
        try:
            if kind == "add":
                added = new_set.by_raft_address(address)
                return added is not None and new_set == self.voter_set.with_voter(added)
            removed = self.voter_set.by_raft_address(address)
            return (
                kind == "rem"
                and removed is not None
                and new_set == self.voter_set.without(removed.node_id)
            )
        except AssertionError:  # the added voter's id or address is already a voter's
            return False

    def handle_appended(self, request: Any) -> None:
        """A membership entry was appended to this node's log (by the leader, or received from
        it): its whole set is the latest (Kafka: ``voterSetHistory.addAt``). An entry without
        a set keeps the latest one, so its truncation pops the right entry."""
        new_set = entry_voter_set(request)
        self.uncommitted.append(self.voter_set if new_set is None else new_set)
        self._publish()

    def handle_truncated(self, request: Any) -> None:
        """The last uncommitted membership entry was truncated (Kafka:
        ``truncateNewEntries``): the set before it is the latest again."""
        if not self.uncommitted:
            logger.error(
                "truncation of a membership entry this node never appended: %.200r", request
            )
            return
        self.uncommitted.pop()
        self._publish()

    def handle_committed(self, request: Any) -> None:
        """A membership entry was applied, in commit order: its set is the committed one."""
        new_set = entry_voter_set(request)
        if self.uncommitted:
            self.uncommitted.pop(0)
        if new_set is not None and new_set != self.committed:
            self.committed = new_set
            try:
                is_voter = new_set.by_raft_address(self._self_address) is not None
                write_voters_file(self._path, new_set, is_voter)
            except OSError:
                logger.exception("cannot write %s", self._path)
        self._publish()

    def handle_dump(self, voters: tuple[Voter, ...]) -> list[str]:
        """A dump was loaded (this node's own, or one the leader sent): its voter set is the
        committed set at its last entry (Kafka: the snapshot's ``VotersRecord``), and no entry
        follows it yet. Returns pysyncobj's other members (never this node: pysyncobj compares
        the list with its own node object, which a string never equals)."""
        if voters:
            self.committed = VoterSet.of(list(voters))
        self.uncommitted = []
        self._publish()
        return self.members()

    def handle_journal(self, uncommitted: list[VoterSet | None]) -> None:
        """At start-up, after the dump and the committed entries: the sets of the journal's
        membership entries not applied yet (``uncommitted_voter_sets``)."""
        self.uncommitted = []
        for voter_set in uncommitted:
            self.uncommitted.append(self.voter_set if voter_set is None else voter_set)
            self._publish()

    def _publish(self) -> None:
        self.voter_set = self.uncommitted[-1] if self.uncommitted else self.committed
        self.is_voter = self.voter_set.by_raft_address(self._self_address) is not None

    def raft_address_of(self, node_id: int) -> HostPort | None:
        voter = self.voter_set.get(node_id)
        return None if voter is None else voter.raft_address
