"""The group requests read from kafka-python's objects, version by version.

Each row builds the request as kafka-python encodes it for that version and checks the typed
value, above all the fields a version does not carry (Kafka's defaults, see the module).
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from pykraft.broker.handlers.group_requests import (
    DescribeGroupsRequestData,
    FindCoordinatorRequestData,
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    ListGroupsRequestData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetCommitTopic,
    OffsetFetchGroup,
    OffsetFetchRequestData,
    SyncGroupRequestData,
    describe_groups_request,
    find_coordinator_request,
    heartbeat_request,
    join_group_request,
    leave_group_request,
    list_groups_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)
from pykraft.coordinator.group.state import Protocol
from pykraft.storage.topic_partition import TopicPartition

GROUP = "group"


def join(version: int, instance: str | None = None) -> Any:
    return JoinGroupRequest(
        version=version,
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        member_id="m",
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"sub")],
        reason=None,
    )


def check_join(version: int, instance: str | None, rebalance_ms: int, seen: str | None) -> None:
    assert join_group_request(join(version, instance)) == JoinGroupRequestData(
        version=version,
        group_id=GROUP,
        member_id="m",
        group_instance_id=seen,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer",
        protocols=(Protocol("range", b"sub"),),
    ), version


def test_join_group() -> None:
    check_join(0, None, 10_000, None)  # v0: the session timeout is the rebalance timeout
    check_join(1, None, 30_000, None)
    check_join(4, "static", 30_000, None)  # below v5 there is no group.instance.id
    check_join(5, "static", 30_000, "static")
    check_join(7, None, 30_000, None)


def sync(version: int, instance: str | None) -> Any:
    return SyncGroupRequest(
        version=version,
        group_id=GROUP,
        generation_id=3,
        member_id="m",
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id="m", assignment=b"a")],
    )


def check_sync(version: int, instance: str | None, seen: str | None, named: bool) -> None:
    assert sync_group_request(sync(version, instance)) == SyncGroupRequestData(
        version=version,
        group_id=GROUP,
        generation_id=3,
        member_id="m",
        group_instance_id=seen,
        protocol_type="consumer" if named else None,
        protocol_name="range" if named else None,
        assignments={"m": b"a"},
    ), version


def test_sync_group() -> None:
    check_sync(2, "static", None, named=False)
    check_sync(3, "static", "static", named=False)
    check_sync(5, None, None, named=True)


def beat(version: int, instance: str | None) -> Any:
    return HeartbeatRequest(
        version=version, group_id=GROUP, generation_id=3, member_id="m", group_instance_id=instance
    )


def test_heartbeat() -> None:
    assert heartbeat_request(beat(2, "static")) == HeartbeatRequestData(
        version=2, group_id=GROUP, generation_id=3, member_id="m", group_instance_id=None
    )
    assert heartbeat_request(beat(3, "static")).group_instance_id == "static"


def test_leave_group() -> None:
    old = LeaveGroupRequest(version=2, group_id=GROUP, member_id="m")
    assert leave_group_request(old) == LeaveGroupRequestData(
        version=2, group_id=GROUP, members=(("m", None),)
    )
    member = LeaveGroupRequest.MemberIdentity
    batched = LeaveGroupRequest(
        version=3,
        group_id=GROUP,
        members=[
            member(member_id="a", group_instance_id=None),
            member(member_id="b", group_instance_id="i"),
        ],
    )
    assert leave_group_request(batched).members == (("a", None), ("b", "i"))


def commit(version: int, instance: str | None = None) -> Any:
    topic = OffsetCommitRequest.OffsetCommitRequestTopic
    partition = topic.OffsetCommitRequestPartition
    return OffsetCommitRequest(
        version=version,
        group_id=GROUP,
        generation_id_or_member_epoch=4,
        member_id="m",
        group_instance_id=instance,
        retention_time_ms=60_000,
        topics=[
            topic(
                name="pets",
                partitions=[
                    partition(
                        partition_index=1,
                        committed_offset=17,
                        committed_leader_epoch=3,
                        commit_timestamp=-1,
                        committed_metadata="meta",
                    )
                ],
            )
        ],
    )


def check_commit(version: int, retention_ms: int, epoch: int, instance: str | None) -> None:
    expected = OffsetCommitRequestData(
        version=version,
        group_id=GROUP,
        generation_id=4,
        member_id="m",
        group_instance_id=instance,
        retention_time_ms=retention_ms,
        topics=(
            OffsetCommitTopic(
                name="pets",
                partitions=(
                    OffsetCommitPartition(
                        partition_index=1,
                        committed_offset=17,
                        committed_leader_epoch=epoch,
                        committed_metadata="meta",
                    ),
                ),
            ),
        ),
    )
    assert offset_commit_request(commit(version, "static")) == expected, version


def test_offset_commit() -> None:
    check_commit(1, -1, -1, None)
    check_commit(2, 60_000, -1, None)  # retention_time_ms only in v2-v4
    check_commit(4, 60_000, -1, None)
    check_commit(5, -1, -1, None)
    check_commit(6, -1, 3, None)  # committed_leader_epoch from v6
    check_commit(7, -1, 3, "static")  # group.instance.id from v7


def test_offset_fetch_one_group_before_v8() -> None:
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    some = OffsetFetchRequest(
        version=7,
        group_id=GROUP,
        topics=[topic(name="pets", partition_indexes=[0, 2])],
        require_stable=False,
    )
    assert offset_fetch_request(some) == OffsetFetchRequestData(
        version=7,
        groups=(
            OffsetFetchGroup(
                group_id=GROUP,
                partitions=(TopicPartition("pets", 0), TopicPartition("pets", 2)),
            ),
        ),
    )
    every = OffsetFetchRequest(version=7, group_id=GROUP, topics=None, require_stable=False)
    assert offset_fetch_request(every).groups == (
        OffsetFetchGroup(group_id=GROUP, partitions=None),
    )


def test_offset_fetch_several_groups_from_v8() -> None:
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    request = OffsetFetchRequest(
        version=8,
        require_stable=False,
        groups=[
            group(group_id="a", member_id=None, member_epoch=-1, topics=None),
            group(
                group_id="b",
                member_id=None,
                member_epoch=-1,
                topics=[group.OffsetFetchRequestTopics(name="pets", partition_indexes=[1])],
            ),
        ],
    )
    assert offset_fetch_request(request).groups == (
        OffsetFetchGroup(group_id="a", partitions=None),
        OffsetFetchGroup(group_id="b", partitions=(TopicPartition("pets", 1),)),
    )


def test_find_coordinator() -> None:
    assert find_coordinator_request(FindCoordinatorRequest(version=0, key=GROUP)) == (
        FindCoordinatorRequestData(version=0, keys=(GROUP,), key_type=0)
    )
    transactional = FindCoordinatorRequest(version=3, key="txn", key_type=1)
    assert find_coordinator_request(transactional).key_type == 1
    batched = FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=["a", "b"])
    assert find_coordinator_request(batched).keys == ("a", "b")


def test_describe_and_list_groups() -> None:
    described = DescribeGroupsRequest(
        version=5, groups=[GROUP, "other"], include_authorized_operations=False
    )
    assert describe_groups_request(described) == DescribeGroupsRequestData(
        version=5, groups=(GROUP, "other")
    )
    assert list_groups_request(ListGroupsRequest(version=3)) == ListGroupsRequestData(
        version=3, states_filter=frozenset()
    )
    filtered = ListGroupsRequest(version=4, states_filter=["Stable"])
    assert list_groups_request(filtered).states_filter == frozenset({"Stable"})
    # Kafka 3.9 compares lower-cased names (GroupCoordinator.handleListGroups).
    mixed = ListGroupsRequest(version=4, states_filter=["stable", "EMPTY", "Nonsense"])
    assert list_groups_request(mixed).states_filter == frozenset({"Stable", "Empty", "Nonsense"})
    typed = ListGroupsRequest(version=5, states_filter=[], types_filter=["Classic"])
    assert list_groups_request(typed).types_filter == frozenset({"classic"})
    assert list_groups_request(ListGroupsRequest(version=4)).states_filter == frozenset()


def test_offset_fetch_require_stable_from_v7() -> None:
    # KIP-447: requireStable exists from OffsetFetch v7 (OffsetFetchRequest.Builder drops it
    # below); it stays False for older versions
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    asked = [topic(name="pets", partition_indexes=[0])]
    v6 = OffsetFetchRequest(version=6, group_id=GROUP, topics=asked)
    assert offset_fetch_request(v6).require_stable is False
    for stable in (False, True):
        v7 = OffsetFetchRequest(version=7, group_id=GROUP, topics=asked, require_stable=stable)
        assert offset_fetch_request(v7).require_stable is stable
    group = OffsetFetchRequest.OffsetFetchRequestGroup
    v9 = OffsetFetchRequest(
        version=9,
        require_stable=True,
        groups=[group(group_id="a", member_id=None, member_epoch=-1, topics=None)],
    )
    assert offset_fetch_request(v9).require_stable is True
