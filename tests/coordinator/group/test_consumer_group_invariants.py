"""Hypothesis: whatever members join, leave, heartbeat (acknowledging or not) and time out, no
partition is ever owned by two members at once (KIP-848's safety: revoke before assign), and once
everyone has heartbeated enough the group is STABLE with every partition owned exactly once.
Classic members (JoinGroup/SyncGroup/Heartbeat, the online upgrade's) take part too: an eager
classic client gives up everything when told to rejoin, a cooperative one rejoins still owning
its partitions and gives up only what it is asked to; what any client believes it owns never
overlaps what anyone else believes. Static members leave for now (epoch -2) and come back under a
new member id; some writes fail (the client keeps its state and retries). After every step the
group equals what a coordinator replaying the log would rebuild (members, epochs, targets,
owners): memory never runs ahead of the log."""

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
        self.cooperative: set[str] = set()
        # instance id -> member id of a static consumer client
        self.static: dict[str, str] = {}
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
            member_id=member_id,
            member_epoch=epoch,
            instance_id=self._instance_of(member_id),
            topic_partitions=owned if ack else None,
        )
        if result.error is not Errors.NONE:
            assert result.error in (
                Errors.UNKNOWN_MEMBER_ID,
                Errors.FENCED_MEMBER_EPOCH,
                Errors.FENCED_INSTANCE_ID,
            )
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
        instance_id = self._instance_of(member_id)
        result = self.h.call(member_id=member_id, member_epoch=-1, instance_id=instance_id)
        assert result.error is Errors.NONE
        del self.clients[member_id]
        self.static.pop(instance_id or "", None)

    def _instance_of(self, member_id: str) -> str | None:
        return next((i for i, m in self.static.items() if m == member_id), None)

    @rule(instance=st.sampled_from(["i-1", "i-2"]))
    def static_join(self, instance: str) -> None:
        group = self.group
        if len(self.clients) >= MAX_MEMBERS or (group is not None and len(group.members) >= 8):
            return
        result = self.h.join(("foo", "bar"), instance_id=instance)
        if result.error is Errors.UNRELEASED_INSTANCE_ID:
            assert instance in self.static
            return
        assert result.error is Errors.NONE
        self.static[instance] = result.member_id
        self.clients[result.member_id] = (result.member_epoch, dict(result.assignment or {}))

    @rule(instance=st.sampled_from(["i-1", "i-2"]))
    def static_leave_for_now(self, instance: str) -> None:
        member_id = self.static.get(instance)
        if member_id is None or member_id not in self.clients:
            return
        result = self.h.call(member_id=member_id, member_epoch=-2, instance_id=instance)
        assert result.error is Errors.NONE
        del self.clients[member_id]  # the client stops; its instance id may come back

    @rule(index=st.integers(min_value=0, max_value=MAX_MEMBERS - 1), ack=st.booleans())
    def failed_heartbeat(self, index: int, ack: bool) -> None:
        """The heartbeat's records are not appended: the client keeps its state and retries."""
        if not self.clients:
            return
        member_id = sorted(self.clients)[index % len(self.clients)]
        epoch, owned = self.clients[member_id]
        self.h.hold_appends = True
        request_id = self.h.heartbeat(
            member_id=member_id,
            member_epoch=epoch,
            instance_id=self._instance_of(member_id),
            topic_partitions=owned if ack else None,
        )
        self.h.release(Errors.NOT_ENOUGH_REPLICAS)
        self.h.hold_appends = False
        result = self.h.answer(request_id)
        if result.error is Errors.NONE:  # nothing to write: answered at once
            if result.assignment is not None:
                owned = dict(result.assignment)
            self.clients[member_id] = (result.member_epoch, owned)
        elif result.error is not Errors.COORDINATOR_NOT_AVAILABLE:
            del self.clients[member_id]

    def _classic_rejoin(self, member_id: str, cooperative: bool = False) -> None:
        """An eager classic client revokes everything, then JoinGroup, SyncGroup; a
        cooperative one rejoins owning its partitions (its subscription's ownedPartitions)
        and gives up those SyncGroup no longer lists."""
        _, before = self.classic.get(member_id, (-1, {}))
        owned_ids = before if cooperative else {}
        self.classic[member_id] = (-1, owned_ids)
        names = {topic_id: name for name, topic_id in self.ids.items()}
        owned = {names[t]: sorted(ps) for t, ps in owned_ids.items() if ps}
        joined = self.classic_api.join(member_id, owned=owned)
        if joined.error is not Errors.NONE:
            assert joined.error is Errors.UNKNOWN_MEMBER_ID or member_id == ""
            self.classic.pop(member_id, None)
            return
        synced = self.classic_api.sync(joined.member_id, joined.generation_id)
        if synced.error is Errors.REBALANCE_IN_PROGRESS:
            self.classic[joined.member_id] = (joined.generation_id, owned_ids)
            return
        assert synced.error is Errors.NONE
        by_name = decode_assignment(synced.assignment)
        assert by_name is not None
        assigned = {self.ids[name]: frozenset(ps) for name, ps in by_name.items()}
        self.classic[joined.member_id] = (joined.generation_id, assigned)
        if cooperative:
            self.cooperative.add(joined.member_id)

    @rule(cooperative=st.booleans())
    def classic_join(self, cooperative: bool) -> None:
        group = self.group
        if group is None or not group.members or len(group.members) >= MAX_MEMBERS:
            return
        self._classic_rejoin("", cooperative)
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
        elif error is Errors.REBALANCE_IN_PROGRESS:
            self._classic_rejoin(member_id, member_id in self.cooperative)
        elif error is Errors.ILLEGAL_GENERATION:
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

    @invariant()
    def memory_matches_the_log(self) -> None:
        live = self.h.coordinator.consumer_groups
        fresh = self.h.replayed().consumer_groups
        assert sorted(live) == sorted(fresh)
        for group_id, group in live.items():
            other = fresh[group_id]
            assert group.members == other.members
            assert (group.group_epoch, group.assignment_epoch) == (
                other.group_epoch,
                other.assignment_epoch,
            )
            assert group.target_assignment == other.target_assignment
            assert group.partition_owners == other.partition_owners
            assert group.partition_epochs == other.partition_epochs
            assert group.subscription_metadata == other.subscription_metadata

    def teardown(self) -> None:
        """Quiescence: static clients that left for now come back, then heartbeats with
        acknowledgements until nothing changes."""
        for instance, member_id in sorted(self.static.items()):
            if member_id not in self.clients:
                result = self.h.join(("foo", "bar"), instance_id=instance)
                assert result.error is Errors.NONE
                self.static[instance] = result.member_id
                self.clients[result.member_id] = (
                    result.member_epoch,
                    dict(result.assignment or {}),
                )
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
