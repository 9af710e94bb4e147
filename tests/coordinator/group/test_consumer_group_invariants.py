"""Hypothesis: whatever members join, leave, heartbeat (acknowledging or not) and time out, no
partition is ever owned by two members at once (KIP-848's safety: revoke before assign), and once
everyone has heartbeated enough the group is STABLE with every partition owned exactly once.
Classic members (JoinGroup/SyncGroup/Heartbeat, the online upgrade's) take part too: an eager
classic client gives up everything when told to rejoin, and what it believes it owns never
overlaps what anyone else believes."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pykraft.coordinator.group.consumer_group import ConsumerGroupState
from pykraft.coordinator.group.consumer_migration import decode_assignment
from pykraft.protocol.errors import Errors
from tests.coordinator.group.consumer_harness import GROUP, ConsumerHarness, topic
from tests.coordinator.group.test_consumer_migration import Classic

TOPICS = [topic("foo", 5), topic("bar", 3)]
MAX_MEMBERS = 5


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # No downgrade: a group left with classic members stays a consumer group here.
        self.h = ConsumerHarness(TOPICS, migration_policy="upgrade")
        # member id -> (epoch, the partitions the client believes it owns)
        self.clients: dict[str, tuple[int, dict[str, frozenset[int]]]] = {}
        # classic member id -> (generation, the partitions it believes it owns)
        self.classic: dict[str, tuple[int, dict[str, frozenset[int]]]] = {}
        self.classic_api = Classic(self.h)
        self.ids = {t.topic_name: t.topic_id for t in TOPICS}

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

    def _classic_rejoin(self, member_id: str) -> None:
        """An eager classic client: revoke everything, JoinGroup, SyncGroup."""
        self.classic[member_id] = (-1, {})
        joined = self.classic_api.join(member_id)
        if joined.error is not Errors.NONE:
            assert joined.error is Errors.UNKNOWN_MEMBER_ID or member_id == ""
            self.classic.pop(member_id, None)
            return
        synced = self.classic_api.sync(joined.member_id, joined.generation_id)
        assert synced.error is Errors.NONE
        by_name = decode_assignment(synced.assignment)
        assert by_name is not None
        owned = {self.ids[name]: frozenset(ps) for name, ps in by_name.items()}
        self.classic[joined.member_id] = (joined.generation_id, owned)

    @rule()
    def classic_join(self) -> None:
        group = self.group
        if group is None or not group.members or len(group.members) >= MAX_MEMBERS:
            return
        self._classic_rejoin("")
        self.classic.pop("", None)

    @rule(index=st.integers(min_value=0, max_value=MAX_MEMBERS - 1))
    def classic_heartbeat(self, index: int) -> None:
        if not self.classic:
            return
        member_id = sorted(self.classic)[index % len(self.classic)]
        generation, _ = self.classic[member_id]
        error = self.classic_api.heartbeat(member_id, generation)
        if error is Errors.UNKNOWN_MEMBER_ID:
            del self.classic[member_id]
        elif error in (Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION):
            self._classic_rejoin(member_id)
        else:
            assert error is Errors.NONE

    @rule(index=st.integers(min_value=0, max_value=MAX_MEMBERS - 1))
    def classic_leave(self, index: int) -> None:
        if not self.classic:
            return
        member_id = sorted(self.classic)[index % len(self.classic)]
        self.classic_api.leave(member_id)
        del self.classic[member_id]

    @rule(ms=st.sampled_from([1_000, 20_000, 46_000]))
    def time_passes(self, ms: int) -> None:
        self.h.advance(ms)
        group = self.group
        for member_id in list(self.clients):
            if group is None or member_id not in group.members:
                del self.clients[member_id]
        for member_id in list(self.classic):
            if group is None or member_id not in group.members:
                del self.classic[member_id]

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
        for _, owned in [*self.clients.values(), *self.classic.values()]:
            pairs = {(t, p) for t, ps in owned.items() for p in ps}
            assert not pairs & believed
            believed |= pairs

    def teardown(self) -> None:
        """Quiescence: heartbeats with acknowledgements until nothing changes."""
        for _ in range(4 * (MAX_MEMBERS + 1)):
            for member_id in sorted(self.clients):
                self.heartbeat(sorted(self.clients).index(member_id), True)
            for member_id in sorted(self.classic):
                self.classic_heartbeat(sorted(self.classic).index(member_id))
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
