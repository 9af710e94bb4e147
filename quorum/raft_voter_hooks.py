"""``DynamicMetadataRaft``'s hooks into pysyncobj's dynamic membership (KIP-853, kraft.version 1).

A mixin, listed before ``MetadataRaft`` in ``quorum/raft_dynamic.DynamicMetadataRaft``'s bases
(a static quorum never has them), so its methods named ``_SyncObj__…`` replace pysyncobj's
private ones (Python mangles ``self.__x`` inside ``SyncObj`` to ``self._SyncObj__x``). The Raft
thread runs them all. What each replaces, and why:

* ``__changeCluster`` (the leader, before it appends a change): refuse a change that is not the
  latest set plus or minus one voter, and set ``__changeClusterIDx`` (pysyncobj reads it but
  never sets it: two changes could be in flight, whose majorities need not overlap);
* ``__doChangeCluster`` (append on the leader or a follower; truncation): push or pop the
  entry's whole voter set (``RaftMembership``) and make pysyncobj's members the latest set —
  never pysyncobj's delta over its current members;
* ``__doApplyCommand`` (commit order): a membership entry's set becomes the committed set;
* ``__onBecomeLeader``: clear ``__changeClusterIDx`` (a change of an earlier term that was
  truncated would block every change until the log passes its index; the no-op of the new
  term fences the earlier ones).

Voter changes are appended only on the leader's Raft thread (``propose_voter_change``): pysyncobj
would forward a queued change to whichever node leads by then, which may be the voter it names.
The other private state read or set — ``__raftLog``, ``__raftLastApplied``, ``__raftCurrentTerm``,
``__commandsWaitingCommit``, ``__lastResponseTime``, ``__raftElectionDeadline`` — is pysyncobj
0.3.17's, pinned by the project's lock file; ``tests/integration/test_raft_membership.py`` fails
if it moves.
"""

from __future__ import annotations

import logging
import math
import pickle
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj
from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.node import TCPNode

from pykraft.quorum.metadata_view import ResultCallback
from pykraft.quorum.raft_voters import (
    MEMBERSHIP_COMMAND,
    VOTER_SET_ATTRIBUTE,
    RaftMembership,
    parse_membership_command,
    uncommitted_voter_sets,
    voter_set_to_text,
)
from pykraft.quorum.voter_changes import Voter, VoterChangeKind, VoterSet

logger = logging.getLogger(__name__)


def _raft(hooks: RaftVoterHooks) -> Any:
    """The ``SyncObj`` these hooks are mixed into (typed loosely: pysyncobj is untyped)."""
    return hooks


class RaftVoterHooks:
    """Mixed into ``DynamicMetadataRaft``; ``membership`` is set before pysyncobj's
    constructor runs."""

    membership: RaftMembership
    _voters_settled: bool
    _config: Any

    def _set_members(self) -> None:
        """pysyncobj's members become the latest voter set (without this node)."""
        raft = _raft(self)
        before = {str(node.address) for node in raft.otherNodes}
        wanted = self.membership.members()
        SyncObj._SyncObj__updateClusterConfiguration(self, wanted)
        if raft._isLeader():
            # pysyncobj's leader times out members by their last answer; a new one has none.
            for node in raft.otherNodes:
                if str(node.address) not in before:
                    raft._SyncObj__lastResponseTime[node] = monotonic_time()

    def _SyncObj__doChangeCluster(self, request: Any, reverse: bool = False) -> bool:
        """pysyncobj passes every membership entry through this (private) method when it is
        appended (leader or follower) and when it is truncated (``reverse``)."""
        try:
            if reverse:
                self.membership.handle_truncated(request)
            else:
                self.membership.handle_appended(request)
            self._set_members()
        except Exception:
            logger.exception("voter set bookkeeping failed on %.200r", request)
        return True

    def _SyncObj__changeCluster(self, request: Any) -> bool:
        """The leader's path for a change it is about to append as its next entry (pysyncobj's
        private ``__changeCluster``): checked first, so a refused change leaves no trace."""
        if not self.membership.is_valid_change(request):
            logger.warning("refused membership change %.200r", request)
            return False
        raft = _raft(self)
        next_index = int(raft._SyncObj__getCurrentLogIndex()) + 1
        accepted = bool(SyncObj._SyncObj__changeCluster(self, request))
        if accepted:
            raft._SyncObj__changeClusterIDx = next_index
        return accepted

    def _SyncObj__onBecomeLeader(self) -> None:
        # super(): quorum/raft_journal.py's mixin syncs the new term's no-op after pysyncobj.
        super()._SyncObj__onBecomeLeader()  # type: ignore[misc]
        _raft(self)._SyncObj__changeClusterIDx = None

    def _SyncObj__doApplyCommand(self, command: Any) -> Any:
        """pysyncobj applies committed entries through this (private) method, in commit order
        (also when it replays the journal at start-up)."""
        if command[:1] != bytes([MEMBERSHIP_COMMAND]):
            return SyncObj._SyncObj__doApplyCommand(self, command)
        request = parse_membership_command(command)
        try:
            self.membership.handle_committed(request)
            self._set_members()
        except Exception:
            logger.exception("voter set bookkeeping failed on %.200r", request)
        return None

    def _deny_utility_command(self, args: Any, callback: Any) -> None:
        """pysyncobj's utility commands ``add``/``remove``/``set_version`` (``syncobj_admin``)
        would change the voters past every KIP-853 check (ALTER on CLUSTER, the cluster id,
        DUPLICATE_VOTER, one change at a time) for any holder of the quorum password: refused.
        Voters change through AddRaftVoter / RemoveRaftVoter only."""
        callback(None, FAIL_REASON.REQUEST_DENIED)

    def _hold_elections_while_observer(self) -> None:
        """Raft thread, every tick: a node outside its own voter set (an observer, a removed
        voter) never campaigns, as Kafka's observers; else a fresh observer that briefly
        reached a voter could raise its term and, once added, depose the leader. A leader's
        append re-arms the timer."""
        if not self.membership.is_voter:
            _raft(self)._SyncObj__raftElectionDeadline = math.inf

    def _settle_voters_after_replay(self) -> None:
        """Raft thread, once, on the first tick that ran (after the dump load and the replay of
        the committed entries): the journal's membership entries not applied yet."""
        if self._voters_settled:
            return
        self._voters_settled = True
        raft = _raft(self)
        pending = uncommitted_voter_sets(raft._SyncObj__raftLog, int(raft.raftLastApplied))
        self.membership.handle_journal(pending)
        self._set_members()

    def propose_voter_change(
        self, kind: VoterChangeKind, voter: Voter, new_set: VoterSet, on_result: ResultCallback
    ) -> None:
        """Append one membership entry carrying the whole new voter set, on the Raft thread and
        only while this node leads (any thread may call); ``on_result(None, fail_reason)`` runs
        on the Raft thread once it commits or fails."""
        node = TCPNode(str(voter.raft_address), **{VOTER_SET_ATTRIBUTE: voter_set_to_text(new_set)})
        request = ["add" if kind is VoterChangeKind.ADD else "rem", node.id, node]

        def append() -> None:
            try:
                self._append_voter_change(request, on_result)
            except Exception:
                logger.exception("appending the voter change failed")
                on_result(None, FAIL_REASON.REQUEST_DENIED)

        future = _raft(self).call_in_raft_thread(append)
        if future.done() and future.exception() is not None:  # too many pending calls
            on_result(None, FAIL_REASON.QUEUE_FULL)

    def _append_voter_change(self, request: list[Any], on_result: ResultCallback) -> None:
        """Raft thread: pysyncobj's leader append (``_checkCommandsToApply``) for one change."""
        raft = _raft(self)
        if not raft._isLeader():
            on_result(None, FAIL_REASON.NOT_LEADER)
            return
        index = int(raft._SyncObj__getCurrentLogIndex()) + 1
        term = raft._SyncObj__raftCurrentTerm
        if not self._SyncObj__changeCluster(request):
            on_result(None, FAIL_REASON.REQUEST_DENIED)
            return
        command = bytes([MEMBERSHIP_COMMAND]) + pickle.dumps(request)
        raft._SyncObj__raftLog.add(command, index, term)
        raft._SyncObj__commandsWaitingCommit[index].append((term, on_result))
