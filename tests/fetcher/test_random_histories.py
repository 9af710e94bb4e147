"""Random leadership histories: the follower always converges without losing agreed records.

A history is a sequence of leader terms with increasing epochs. Each new leader starts from a
prefix of some earlier replica log (what it had when elected), assigns its epoch at its log end
(Kafka ``Partition.makeLeader``) and writes a few records. So records of one epoch exist only
as prefixes of that term's log — Kafka's guarantee that an (offset, epoch) pair names one
record. The current leader is the last term; the follower holds a prefix of any earlier log.

On both truncation paths the follower must reach the leader's log exactly, every completed
truncation must leave a prefix of the leader's log (checked by the harness), and no truncation
may cut below the longest common prefix of the two logs (nothing agreed is thrown away).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fetcher.harness import Follower, MockLeader, MockLog, Rec

History = tuple[list[Rec], int, list[Rec], int]


@st.composite
def histories(draw: st.DrawFn) -> History:
    """(leader records, leader epoch, follower records, follower high watermark)."""
    logs: list[list[Rec]] = [[]]
    epoch = -1
    for _ in range(draw(st.integers(3, 8))):
        epoch += draw(st.integers(1, 2))
        # A recent replica's log: leadership alternates among a few replicas.
        parent = logs[-1 - draw(st.integers(0, min(2, len(logs) - 1)))]
        # Elected with most of that replica's log: unreplicated tails are short.
        base = parent[: len(parent) - draw(st.integers(0, min(2, len(parent))))]
        written = [(len(base) + i, epoch) for i in range(draw(st.integers(0, 3)))]
        logs.append(base + written)
    leader = logs[-1]
    # Mostly pick a replica that wrote in an epoch the leader never saw: the interesting case.
    earlier = logs[1:-1] or logs[:-1]
    diverged = [log for log in earlier if epochs(log) - epochs(leader)]
    prefer_diverged = bool(diverged) and draw(st.booleans())
    source = draw(st.sampled_from(diverged if prefer_diverged else earlier))
    follower = source[: len(source) - draw(st.integers(0, min(2, len(source))))]
    common = common_prefix(follower, leader)
    # The follower's high watermark never exceeds what the current leader agrees with.
    high_watermark = draw(st.integers(0, common))
    return leader, epoch, follower, high_watermark


def epochs(log: list[Rec]) -> set[int]:
    return {epoch for _, epoch in log}


def common_prefix(a: list[Rec], b: list[Rec]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def leader_log(records: list[Rec], epoch: int) -> MockLog:
    """The leader's log with its epoch assigned where its own term began."""
    written = [r for r in records if r[1] == epoch]
    inherited = records[: len(records) - len(written)]
    log = MockLog.of([e for _, e in inherited])
    log.become_leader(epoch)
    log.append(written)
    log.high_watermark = log.log_end_offset
    return log


@pytest.mark.parametrize("truncate_on_fetch", [True, False], ids=["diverging", "offsets"])
@settings(max_examples=200, deadline=None)
@given(history=histories())
def test_follower_converges_to_any_leader(truncate_on_fetch: bool, history: History) -> None:
    leader_records, epoch, follower_records, high_watermark = history
    leader = MockLeader(leader_log(leader_records, epoch), epoch, max_records=3)
    follower = Follower(
        MockLog.of([e for _, e in follower_records], high_watermark=high_watermark),
        truncate_on_fetch,
    )
    follower.add_partition(epoch)
    follower.run_until_in_sync(leader, max_rounds=60)
    assert follower.log.records == leader_records
    agreed = common_prefix(follower_records, leader_records)
    assert all(t.offset >= agreed for t in follower.truncations), follower.truncations
    assert follower.failed is None
