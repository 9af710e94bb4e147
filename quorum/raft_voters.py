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
like Kafka's ``VotersRecord``, so any replica that receives the entry learns who everyone is —
including an observer that never saw the static ``controller.quorum.voters`` of the others.
``RaftMembership`` sees every change through ``MetadataRaft``'s hooks on pysyncobj
(``quorum/raft_voter_hooks.py``, the Raft thread) and:

* keeps ``known``: Raft address -> ``Voter``, from the static configuration, the voters file,
  the dump header and every entry's ``voter_set``;
* publishes ``voter_set``: pysyncobj's current members (this node included once it is a voter)
  named through ``known`` — an immutable value any thread may read;
* writes the voters file (``raft/voters.json``, atomically, fsync'd) whenever the set changes.

At start-up the members are, in this order of precedence: the journal's last membership entry
(committed or not: ``members_of_latest_change``), the dump's list, the voters file, and only
without any of them ``controller.quorum.voters`` / ``controller.quorum.bootstrap.servers``.
pysyncobj would re-apply committed changes one by one over its starting list; pykraft never does
(``RaftVoterHooks._SyncObj__doApplyCommand``): that replay passes through stale sets. Without
the file (no change ever seen) the static configuration stays authoritative exactly as before:
the dump's member list is ignored, so editing ``controller.quorum.voters`` while the quorum is
down still works.
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


def latest_membership_entry(journal: Sequence[Any]) -> tuple[int, Any] | None:
    """The Raft index and node of the last membership entry in pysyncobj's journal (entries are
    ``(command, index, term)``), or None. The entry is pickled by pysyncobj itself; it came from
    this node or an authenticated peer (``quorum/raft_transport.py``)."""
    for position in range(len(journal) - 1, -1, -1):
        command, index, _ = journal[position]
        if command[:1] != bytes([MEMBERSHIP_COMMAND]):
            continue
        try:
            request = pickle.loads(command[1:])
        except Exception:
            return None
        if isinstance(request, list | tuple) and len(request) >= 3:
            return int(index), request[2]
        return None
    return None


def members_of_latest_change(journal: Sequence[Any]) -> frozenset[str] | None:
    """The members the journal's last membership entry set (its ``voter_set``), or None when
    the journal has none. A replica uses the latest voter set in its log, committed or not
    (Raft's rule; Kafka's ``KRaftControlRecordStateMachine`` reads uncommitted VotersRecords
    too), so after a restart this is the truth; pysyncobj's own replay would re-apply the
    committed changes one by one over its starting list and pass through stale sets (an
    ``add 4`` replayed over a list that already lacks 4 after a later ``remove 4``)."""
    latest = latest_membership_entry(journal)
    if latest is None:
        return None
    text = getattr(latest[1], VOTER_SET_ATTRIBUTE, None)
    if type(text) is not str:
        return None
    try:
        return frozenset(str(v.raft_address) for v in voter_set_from_text(text).voters)
    except (ValueError, AssertionError):
        logger.error("the journal's last membership entry has a malformed voter set")
        return None


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
    """The voter set as this controller's pysyncobj sees it. Only the Raft thread calls the
    ``handle_*`` methods; ``voter_set``/``is_voter`` are immutable values for any thread."""

    def __init__(self, config: ControllerConfig, raft_dir: Path) -> None:
        self._path = raft_dir / VOTERS_FILE_NAME
        self._self_address = str(config.self_raft_address)
        # A static quorum (kraft.version 0) has controller.quorum.voters and nothing else.
        stored = read_voters_file(self._path) if config.kraft_version == 1 else None
        # Any membership change seen: pysyncobj's log, not the configuration, holds the set.
        self.dynamic = stored is not None
        if stored is not None:
            base, self.is_voter = stored
        else:
            base = static_voters(config)
            self.is_voter = base.get(config.node_id) is not None
        self.known: dict[str, Voter] = {str(v.raft_address): v for v in base.voters}
        self.voter_set = base
        self.initial_others: list[str] = [
            address for address in self.known if address != self._self_address
        ]
        if not self.is_voter and stored is None:
            # An observer: its bootstrap servers are the voters it will follow.
            self.initial_others = [str(address) for address in config.bootstrap_servers]

    def learn(self, voter_set: VoterSet) -> None:
        for voter in voter_set.voters:
            self.known[str(voter.raft_address)] = voter

    def handle_change(self, request: Any, reverse: bool, other_addresses: set[str]) -> None:
        """A membership entry was appended or undone (``reverse``)."""
        kind = request[0] if isinstance(request, list | tuple) and request else None
        node = request[2] if isinstance(request, list | tuple) and len(request) >= 3 else None
        text = getattr(node, VOTER_SET_ATTRIBUTE, None)
        if type(text) is str:
            try:
                self.learn(voter_set_from_text(text))
            except (ValueError, AssertionError):
                logger.error("membership entry with a malformed voter set: %.200s", text)
        if str(getattr(node, "address", "")) == self._self_address and kind in ("add", "rem"):
            self.is_voter = (kind == "add") != reverse
        self.dynamic = True
        self.handle_members(other_addresses)

    def handle_members(self, other_addresses: set[str]) -> None:
        """pysyncobj's member list (without this node) may have changed: publish and persist."""
        members = set(other_addresses)
        if self.is_voter:
            members.add(self._self_address)
        voters = []
        for address in sorted(members):
            voter = self.known.get(address)
            if voter is None:
                logger.warning("Raft member %s has no known node id; left out", address)
                continue
            voters.append(voter)
        try:
            voter_set = VoterSet.of(voters)
        except AssertionError:
            logger.error("Raft members name one node id twice: %s", voters)
            return
        if voter_set == self.voter_set and not self.dynamic:
            return
        changed = voter_set != self.voter_set
        self.voter_set = voter_set
        if changed or not self._path.exists():
            try:
                write_voters_file(self._path, voter_set, self.is_voter)
            except OSError:
                logger.exception("cannot write %s", self._path)

    def handle_dump(
        self, voters: tuple[Voter, ...], dynamic: bool, dump_members: tuple[str, ...]
    ) -> list[str]:
        """A dump was loaded (this node's own, or one the leader sent): learn its voters and
        return what pysyncobj should take as the other members — the dump's list once the set
        is dynamic, this node's configured base otherwise (module docstring). Never this node:
        pysyncobj compares the list with its own node object, which a string never equals."""
        self.learn(VoterSet.of(list(voters)))
        if dynamic and not self.dynamic:
            self.dynamic = True
            self.is_voter = self._self_address in dump_members
        if not self.dynamic:
            return list(self.initial_others)
        return [address for address in dump_members if address != self._self_address]

    def raft_address_of(self, node_id: int) -> HostPort | None:
        voter = self.voter_set.get(node_id)
        return None if voter is None else voter.raft_address
