"""The timers of consumer group members (KIP-848), as Kafka's ``GroupMetadataManager``
schedules them on its coordinator timer; pure: deadlines in, expired members out.

* session: every member; restarted by each heartbeat (a classic member's by its JoinGroup,
  SyncGroup and Heartbeat, with its JoinGroup session timeout);
* rebalance: a consumer-protocol member while it must revoke partitions, restarted whenever
  its assignment changes (``maybeReconcile``); classic members have none;
* join: a classic member told to rejoin (REBALANCE_IN_PROGRESS) has its rebalance timeout to
  do so (``scheduleConsumerGroupJoinTimeoutIfAbsent``); cancelled by its JoinGroup;
* sync: a classic member that joined has its rebalance timeout to send SyncGroup
  (``scheduleConsumerGroupSyncTimeout``); cancelled by it.

Any timer expiring fences the member (``consumerGroupFenceMemberOperation``).
"""

from __future__ import annotations

import attrs

from pykraft.coordinator.group.consumer_member import ConsumerGroupMember, MemberState


@attrs.define
class MemberDeadlines:
    session_ms: int
    rebalance_ms: int | None = None
    join_ms: int | None = None
    sync_ms: int | None = None

    def earliest_ms(self) -> int:
        optional = (self.rebalance_ms, self.join_ms, self.sync_ms)
        return min([self.session_ms, *(d for d in optional if d is not None)])


class MemberTimers:
    def __init__(self) -> None:
        self._deadlines: dict[tuple[str, str], MemberDeadlines] = {}

    def of(self, group_id: str, member_id: str, now_ms: int) -> MemberDeadlines:
        return self._deadlines.setdefault((group_id, member_id), MemberDeadlines(now_ms))

    def session(
        self, group_id: str, member: ConsumerGroupMember, now_ms: int, default_ms: int
    ) -> None:
        timeout_ms = member.classic_session_timeout_ms
        self.of(group_id, member.member_id, now_ms).session_ms = now_ms + (
            default_ms if timeout_ms is None else timeout_ms
        )

    def reconciled(
        self, group_id: str, member: ConsumerGroupMember, now_ms: int, changed: bool
    ) -> None:
        """``maybeReconcile``'s timer: (re)start while UNREVOKED_PARTITIONS when the member
        changed, cancel otherwise; a classic member has join and sync timers instead."""
        deadlines = self.of(group_id, member.member_id, now_ms)
        if member.uses_classic_protocol or member.state is not MemberState.UNREVOKED_PARTITIONS:
            deadlines.rebalance_ms = None
        elif changed or deadlines.rebalance_ms is None:
            deadlines.rebalance_ms = now_ms + max(member.rebalance_timeout_ms, 0)

    def join_if_absent(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        deadlines = self.of(group_id, member.member_id, now_ms)
        if deadlines.join_ms is None:
            deadlines.join_ms = now_ms + max(member.rebalance_timeout_ms, 0)

    def joined(self, group_id: str, member: ConsumerGroupMember, now_ms: int) -> None:
        """A classic member's JoinGroup: no join timer; SyncGroup due within its rebalance
        timeout."""
        deadlines = self.of(group_id, member.member_id, now_ms)
        deadlines.join_ms = None
        deadlines.sync_ms = now_ms + max(member.rebalance_timeout_ms, 0)

    def synced(self, group_id: str, member_id: str, now_ms: int) -> None:
        self.of(group_id, member_id, now_ms).sync_ms = None

    def remove(self, group_id: str, member_id: str) -> None:
        self._deadlines.pop((group_id, member_id), None)

    def of_group(self, group_id: str) -> dict[str, MemberDeadlines]:
        """Copies of one group's deadlines (a snapshot)."""
        return {m: attrs.evolve(d) for (g, m), d in self._deadlines.items() if g == group_id}

    def replace_group(self, group_id: str, deadlines: dict[str, MemberDeadlines]) -> None:
        for key in [k for k in self._deadlines if k[0] == group_id]:
            del self._deadlines[key]
        for member_id, member_deadlines in deadlines.items():
            self._deadlines[(group_id, member_id)] = attrs.evolve(member_deadlines)

    def next_deadline_ms(self) -> int | None:
        return min((d.earliest_ms() for d in self._deadlines.values()), default=None)

    def expired(self, now_ms: int) -> list[tuple[str, str]]:
        return sorted(k for k, d in self._deadlines.items() if d.earliest_ms() <= now_ms)
