"""Hypothesis: whatever members join, leave, heartbeat (acknowledging or not) and time out, no
partition is ever owned by two members at once (KIP-848's safety: revoke before assign), and once
everyone has heartbeated enough the group is STABLE with every partition owned exactly once,
evenly spread."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pykraft.coordinator.group.consumer_group import ConsumerGroupState
from pykraft.protocol.errors import Errors
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness, topic

TOPICS = [topic("foo", 5), topic("bar", 3)]
MAX_MEMBERS = 5


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = ConsumerHarness(TOPICS)
        # member id -> (epoch, the partitions the client believes it owns)
        self.clients: dict[str, tuple[int, dict[str, frozenset[int]]]] = {}

    @property
    def group(self):
        return self.h.coordinator.consumer_groups.get(GROUP)

    @rule(both=st.booleans())
    def join(self, both: bool) -> None:
        if len(self.clients) >= MAX_MEMBERS:
            return
        names = ("foo", "bar") if both else ("foo",)
        result = self.h.join(names)
        assert result.error is Errors.NONE and result.member_id is not None
        self.clients[result.member_id] = (result.member_epoch, dict(result.assignment or {}))

    @rule(index=st.integers(min_value=0, max_value=MAX_MEMBERS - 1), ack=st.booleans())
    def heartbeat(self, index: int, ack: bool) -> None:
        if not self.clients:
            return
        member_id = sorted(self.clients)[index % len(self.clients)]
        epoch, owned = self.clients[member_id]
        result = self.h.call(
            member_id=member_id, member_epoch=epoch, topic_partitions=owned if ack else None
        )
        if result.error is not Errors.NONE:
            assert result.error in (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH)
            del self.clients[member_id]  # a real client drops everything and rejoins
            return
        if result.assignment is not None:
            owned = dict(result.assignment)  # revoke what is gone, take what is new
        self.clients[member_id] = (result.member_epoch, owned)

    @rule(index=st.integers(min_value=0, max_value=MAX_MEMBERS - 1))
    def leave(self, index: int) -> None:
        if not self.clients:
            return
        member_id = sorted(self.clients)[index % len(self.clients)]
        assert self.h.call(member_id=member_id, member_epoch=-1).error is Errors.NONE
        del self.clients[member_id]

    @rule(ms=st.sampled_from([1_000, 20_000, 46_000]))
    def time_passes(self, ms: int) -> None:
        self.h.advance(ms)
        group = self.group
        for member_id in list(self.clients):
            if group is None or member_id not in group.members:
                del self.clients[member_id]

    @invariant()
    def no_partition_has_two_owners(self) -> None:
        group = self.group
        if group is None:
            return
        seen: dict[tuple[str, int], str] = {}
        for member in group.members.values():
            for topic_partition in member.owned():
                assert topic_partition not in seen, (topic_partition, seen[topic_partition])
                seen[topic_partition] = member.member_id
        # what clients believe they own never overlaps either
        believed: set[tuple[str, int]] = set()
        for _, owned in self.clients.values():
            pairs = {(t, p) for t, ps in owned.items() for p in ps}
            assert not pairs & believed
            believed |= pairs

    def teardown(self) -> None:
        """Quiescence: heartbeats with acknowledgements until nothing changes."""
        for _ in range(4 * (MAX_MEMBERS + 1)):
            for member_id in sorted(self.clients):
                self.heartbeat(sorted(self.clients).index(member_id), True)
        group = self.group
        if group is None or not group.members:
            return
        assert group.state is ConsumerGroupState.STABLE
        owned = [tp for m in group.members.values() for tp in m.owned()]
        subscribed = {
            t.topic_id
            for t in TOPICS
            if any(t.topic_name in m.subscribed_topic_names for m in group.members.values())
        }
        expected = {
            (t.topic_id, p)
            for t in TOPICS
            if t.topic_id in subscribed
            for p in range(t.num_partitions)
        }
        assert sorted(owned) == sorted(expected)


ConsumerGroupMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestConsumerGroupInvariants = ConsumerGroupMachine.TestCase
