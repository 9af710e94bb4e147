"""What DescribeGroups and ListGroups show of a group (Kafka's ``GroupSummary``,
``MemberSummary``, ``GroupOverview`` and ``GroupMetadata.summary``)."""

from __future__ import annotations

import attrs

from pykraft.coordinator.group.state import GroupMetadata, GroupState


@attrs.frozen
class MemberSummary:
    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    # KIP-345: a static member's group.instance.id (DescribeGroups v4+).
    group_instance_id: str | None = None


@attrs.frozen
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()


@attrs.frozen
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str
    # ListGroups v5's GroupType (KIP-848): "classic" or "consumer".
    group_type: str = "classic"


DEAD_GROUP = GroupSummary(GroupState.DEAD.value, "", "")
NO_GROUP = GroupSummary("", "", "")


def summary(group: GroupMetadata) -> GroupSummary:
    """``GroupMetadata.summary``: member metadata and assignments only when STABLE."""
    protocol_type = group.protocol_type or ""
    if group.is_(GroupState.STABLE):
        protocol = group.protocol_name or ""
        members = tuple(
            MemberSummary(
                m.member_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol),
                m.assignment,
                m.group_instance_id,
            )
            for m in group.members.values()
        )
        return GroupSummary(group.state.value, protocol_type, protocol, members)
    members = tuple(
        MemberSummary(m.member_id, m.client_id, m.client_host, b"", b"", m.group_instance_id)
        for m in group.members.values()
    )
    return GroupSummary(group.state.value, protocol_type, "", members)
