"""A dump taken in the middle of a voter change, the change truncated, the node restarted
(review finding 1, ``/tmp/rev3/report.md``): three ``MetadataRaft`` nodes in one process.

Leader L of {1, 2, 3} appends ``rem X`` while X and Y are down, so it cannot commit; a dump
taken now must hold the committed set {1, 2, 3} (Kafka: the snapshot carries
``voterSetAtOffset(snapshot offset)``), not pysyncobj's live {L, Y}. X and Y then elect a leader
without L, which truncates ``rem X`` from L's log when L comes back; L restarted again must count
{1, 2, 3}. Before the fix it took {L, Y} from its dump, and with one more legitimate change two
leaders could commit on the disjoint majorities {L} and {X, Y}."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pykraft.quorum.raft import DUMP_FILE_NAME, MetadataRaft
from pykraft.quorum.raft_dump import read_dump
from pykraft.quorum.voter_changes import VoterChangeKind
from tests.integration.test_raft_membership_random import Quorum, wait

pytestmark = pytest.mark.integration


def members(node: MetadataRaft) -> set[str]:
    read = node.call_in_raft_thread(lambda: {str(n.address) for n in node.otherNodes})
    return set(read.result(5))


def test_a_dump_mid_change_then_truncation_then_restart_keeps_the_committed_set(
    tmp_path: Path,
) -> None:
    quorum = Quorum(tmp_path)
    try:
        for node_id in (1, 2, 3):
            quorum.start(node_id)
        leader = quorum.leader()
        leader_id = next(i for i, n in quorum.live.items() if n is leader)
        x, y = (i for i in (1, 2, 3) if i != leader_id)
        quorum.stop(x)
        quorum.stop(y)
        voter_x = leader.voter_set.get(x)
        assert voter_x is not None
        answers: list[int] = []
        leader.propose_voter_change(
            VoterChangeKind.REMOVE,
            voter_x,
            leader.voter_set.without(x),
            lambda _, error: answers.append(error),
        )
        wait(lambda: leader.voter_set.node_ids == tuple(sorted((leader_id, y))), "rem X appended")
        dump = quorum.root / f"c{leader_id}" / "raft" / DUMP_FILE_NAME
        started = time.monotonic()
        leader.call_in_raft_thread(leader.forceLogCompaction)
        wait(lambda: dump.exists() and dump.stat().st_mtime >= started - 1, "the dump")
        wait(lambda: read_dump(dump)[0].voter_set != (), "the dump's header")
        header = read_dump(dump)[0]
        assert [v.node_id for v in header.voter_set] == [1, 2, 3]
        assert len(header.voters) == 3
        quorum.stop(leader_id)

        # X and Y elect a leader without L and commit; L rejoins and is truncated.
        quorum.start(x)
        quorum.start(y)
        quorum.model = {1, 2, 3}
        wait(lambda: any(quorum.live[i].is_leader() for i in (x, y)), "a leader of X and Y")
        quorum.start(leader_id)
        rejoined = quorum.live[leader_id]
        wait(lambda: rejoined._voters_settled, "L settled (its port may be in TIME_WAIT)")
        wait(lambda: rejoined.membership.uncommitted == [], "rem X truncated")
        quorum.check()  # every node counts {1, 2, 3}, and a write commits

        # L restarted once more: its dump and journal still say {1, 2, 3}.
        quorum.stop(leader_id)
        quorum.start(leader_id)
        restarted = quorum.live[leader_id]
        wait(lambda: restarted._voters_settled, "settled")
        assert restarted.voter_set.node_ids == (1, 2, 3)
        others = {str(quorum.address[i]) for i in (x, y)}
        wait(lambda: members(restarted) == others, "L's members")
        quorum.check()
    finally:
        for node_id in list(quorum.live):
            quorum.stop(node_id)
