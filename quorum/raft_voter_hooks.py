"""``DynamicMetadataRaft``'s hooks into pysyncobj's dynamic membership (KIP-853, kraft.version 1).

A mixin, listed before ``MetadataRaft`` in ``quorum/raft_dynamic.DynamicMetadataRaft``'s bases
(a static quorum never has them), so its two methods named
``_SyncObj__…`` replace pysyncobj's private ``__doChangeCluster`` / ``__updateClusterConfiguration``
(Python mangles ``self.__x`` inside ``SyncObj`` to ``self._SyncObj__x``) and report every change to
``quorum/raft_voters.RaftMembership``; the Raft thread runs them all. The other private state read
or set here — ``__changeClusterIDx``, ``__noopIDx``, ``__raftElectionDeadline``, ``__raftLog`` — is
pysyncobj 0.3.17's, pinned by the project's lock file; ``tests/integration/test_raft_membership.py``
fails if it moves.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj
from pysyncobj.node import TCPNode

from pykraft.quorum.metadata_view import ResultCallback
from pykraft.quorum.raft_voters import (
    MEMBERSHIP_COMMAND,
    VOTER_SET_ATTRIBUTE,
    RaftMembership,
    members_of_latest_change,
    voter_set_to_text,
)
from pykraft.quorum.voter_changes import Voter, VoterChangeKind, VoterSet

logger = logging.getLogger(__name__)


def _raft(hooks: RaftVoterHooks) -> Any:
    """The ``SyncObj`` these hooks are mixed into (typed loosely: pysyncobj is untyped)."""
    return hooks


class RaftVoterHooks:
    """Mixed into ``MetadataRaft`` (a ``SyncObj``); ``membership`` is set before pysyncobj's
    constructor runs."""

    membership: RaftMembership
    _voters_settled: bool
    _config: Any

    def _other_addresses(self) -> set[str]:
        """Raft thread: pysyncobj's current members other than this node."""
        return {str(node.address) for node in _raft(self).otherNodes}

    def _SyncObj__doChangeCluster(self, request: Any, reverse: bool = False) -> bool:
        """pysyncobj applies every membership change through this (private) method: on append
        and on truncation (``reverse``). Overridden to follow the voter set."""
        changed = bool(SyncObj._SyncObj__doChangeCluster(self, request, reverse))
        try:
            self.membership.handle_change(request, reverse, self._other_addresses())
        except Exception:
            logger.exception("voter set bookkeeping failed on %r", request)
        return changed

    def _SyncObj__changeCluster(self, request: Any) -> bool:
        """The leader's path for a change it is about to append as its next entry (pysyncobj's
        private ``__changeCluster``). pysyncobj refuses a second change until the entry at
        ``__changeClusterIDx`` is applied, but never sets that index: two changes could be in
        flight at once, whose majorities need not overlap (Raft's single-server changes must
        commit one by one). Set it here. A change without a ``voter_set`` did not come from
        ``propose_voter_change`` (pysyncobj's ``syncobj_admin -add/-remove``): refused."""
        node = request[2] if isinstance(request, list | tuple) and len(request) >= 3 else None
        if type(getattr(node, VOTER_SET_ATTRIBUTE, None)) is not str:
            logger.warning("refused a membership change without a voter set: %.200r", request)
            return False
        raft = _raft(self)
        next_index = int(raft._SyncObj__getCurrentLogIndex()) + 1
        accepted = bool(SyncObj._SyncObj__changeCluster(self, request))
        if accepted:
            raft._SyncObj__changeClusterIDx = next_index
        return accepted

    def _SyncObj__updateClusterConfiguration(self, new_nodes: Any) -> None:
        """pysyncobj sets the members from a loaded dump through this (private) method."""
        SyncObj._SyncObj__updateClusterConfiguration(self, new_nodes)
        try:
            self.membership.handle_members(self._other_addresses())
        except Exception:
            logger.exception("voter set bookkeeping failed after loading a dump")

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

    def _SyncObj__doApplyCommand(self, command: Any) -> Any:
        """pysyncobj applies committed entries through this (private) method and re-applies a
        membership change there, "required only after node restarts". pykraft never needs it:
        a change is in effect from its append, and a restart starts from the voters file, the
        dump and the journal's last change (``_settle_voters_after_replay``); re-applying older
        changes over that would pass through stale voter sets."""
        if command[:1] == bytes([MEMBERSHIP_COMMAND]):
            return None
        return SyncObj._SyncObj__doApplyCommand(self, command)

    def _settle_voters_after_replay(self) -> None:
        """Raft thread, once, on the first tick that ran (after the dump load): the journal's
        last membership change sets the members (``raft_voters.members_of_latest_change``)."""
        if self._voters_settled:
            return
        self._voters_settled = True
        members = members_of_latest_change(_raft(self)._SyncObj__raftLog)
        if members is not None:
            self_address = str(self._config.self_raft_address)
            self.membership.is_voter = self_address in members
            _raft(self)._SyncObj__updateClusterConfiguration(sorted(members - {self_address}))

    def propose_voter_change(
        self, kind: VoterChangeKind, voter: Voter, new_set: VoterSet, on_result: ResultCallback
    ) -> None:
        """Enqueue one membership entry carrying the whole new voter set (any thread);
        ``on_result(None, fail_reason)`` runs on the Raft thread once it commits or fails."""
        node = TCPNode(str(voter.raft_address), **{VOTER_SET_ATTRIBUTE: voter_set_to_text(new_set)})
        if kind is VoterChangeKind.ADD:
            _raft(self).addNodeToCluster(node, callback=on_result)
        else:
            _raft(self).removeNodeFromCluster(node, callback=on_result)
