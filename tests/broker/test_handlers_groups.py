"""The group API handlers with requests encoded by kafka-python, over the real shell, a real
ReplicaManager and ``__consumer_offsets`` log, and the in-process controller — no sockets.

Each test runs in one event loop (the shell's timer and appends are asyncio); time is a fake
clock that only moves when a test says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
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

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.coordinator.group.loader import read_partition_records
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC, OffsetsReplay
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    TopicRecord,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    Cluster,
    InProcessController,
    call_async,
    encode,
    partition_record,
    pets_led_here,
    services,
)
from tests.fake_clock import FakeClock

OFFSETS_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
GROUP = "readers"
START_MS = 5_000_000
_JoinProtocol = JoinGroupRequest.JoinGroupRequestProtocol
_Assignment = SyncGroupRequest.SyncGroupRequestAssignment


class GroupCluster(Cluster):
    """The replica harness whose metadata changes also reach the group coordinator."""

    shell: GroupCoordinatorShell | None = None

    def publish(self, *records: MetadataRecord) -> LocalReplicaChanges:
        changes = super().publish(*records)
        if self.shell is not None:
            self.shell.on_metadata(changes, self.image)
        return changes


class Broker:
    """Handlers by API key and a way to call them with kafka-python requests."""

    def __init__(self, cluster: GroupCluster, **config: Any) -> None:
        config.setdefault("offsets_topic_num_partitions", 1)
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.cluster = cluster
        self.clock = FakeClock(wall_clock_start_ms=START_MS)
        self.controller = InProcessController(cluster)
        self.shell = GroupCoordinatorShell(
            cluster.replica_manager, GroupConfig(**config), wall_clock_ms=self.clock.wall_clock_ms
        )
        cluster.shell = self.shell
        svc = services(cluster, controller=self.controller, wall_clock_ms=self.clock.wall_clock_ms)
        self.handlers: dict[ApiKey, ApiHandler] = broker_handlers(svc, group_coordinator=self.shell)

    async def send(self, api_key: ApiKey, version: int, request: Any) -> Any:
        body = await call_async(self.handlers[api_key], api_key, version, encode(request, version))
        assert body is not None
        return decode_response(api_key, version, body)

    def send_soon(self, api_key: ApiKey, version: int, request: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.send(api_key, version, request))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[GroupCluster]:
    yield from started_cluster(GroupCluster(tmp_path), *pets_led_here())


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def settle() -> None:
    """Let the shell's tasks (loads, appends, a zero-delay timer) run."""
    for _ in range(20):
        await asyncio.sleep(0)


def offsets_led_here(leader: int = LOCAL) -> list[MetadataRecord]:
    return [
        TopicRecord(name=OFFSETS_TOPIC, topic_id=OFFSETS_ID),
        partition_record(OFFSETS_ID, 0, (LOCAL, OTHER), leader=leader, isr=(leader,)),
    ]


def join(version: int, member_id: str = "", instance: str | None = None) -> Any:
    return JoinGroupRequest(
        version=version,
        group_id=GROUP,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=30_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[_JoinProtocol(name="range", metadata=b"subscription")],
        reason=None,
    )


async def join_and_sync(broker: Broker, version: int = 7) -> tuple[str, int]:
    first = await broker.send(ApiKey.JOIN_GROUP, version, join(version))
    assert first.error_code == Errors.MEMBER_ID_REQUIRED
    joined = await broker.send(ApiKey.JOIN_GROUP, version, join(version, first.member_id))
    assert joined.error_code == Errors.NONE and joined.leader == first.member_id
    sync = SyncGroupRequest(
        version=5,
        group_id=GROUP,
        generation_id=joined.generation_id,
        member_id=joined.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[_Assignment(member_id=joined.member_id, assignment=b"pets-0")],
    )
    synced = await broker.send(ApiKey.SYNC_GROUP, 5, sync)
    assert (synced.error_code, synced.assignment) == (Errors.NONE, b"pets-0")
    assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    return joined.member_id, joined.generation_id


def commit(
    version: int, offset: int, member_id: str = "", generation: int = -1, topic: str = "pets"
) -> Any:
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0,
        committed_offset=offset,
        committed_leader_epoch=3,
        commit_timestamp=-1,
        committed_metadata="meta",
    )
    return OffsetCommitRequest(
        version=version,
        group_id=GROUP,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[partition])],
    )


def fetch_v7(topics: list[str] | None) -> Any:
    topic_class = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        version=7,
        group_id=GROUP,
        topics=None
        if topics is None
        else [topic_class(name=t, partition_indexes=[0]) for t in topics],
        require_stable=False,
    )


# ------------------------------------------------------------------ FindCoordinator


def test_find_coordinator_creates_the_offsets_topic(cluster: GroupCluster) -> None:
    # KafkaApis.getCoordinator: no topic -> create it, COORDINATOR_NOT_AVAILABLE meanwhile
    async def scenario() -> None:
        broker = Broker(cluster, offsets_topic_num_partitions=3, offsets_topic_replication_factor=2)
        request = FindCoordinatorRequest(version=0, key=GROUP)
        first = await broker.send(ApiKey.FIND_COORDINATOR, 0, request)
        assert (first.error_code, first.node_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        await settle()
        [(call, topic)] = broker.controller.calls
        assert call == "create_topic" and isinstance(topic, CreatableTopic)
        assert topic.name == OFFSETS_TOPIC
        assert (topic.num_partitions, topic.replication_factor) == (3, 2)
        assert ("cleanup.policy", "compact") in [(c.name, c.value) for c in topic.configs]
        offsets = cluster.image.topics.by_name[OFFSETS_TOPIC]
        leader = offsets.partitions[broker.shell.partition_for(GROUP)].leader
        found = await broker.send(ApiKey.FIND_COORDINATOR, 0, request)
        assert (found.error_code, found.node_id, found.port) == (Errors.NONE, leader, 9090 + leader)
        assert found.host == f"broker{leader}.local"

    run(scenario)


def test_find_coordinator_waits_for_enough_alive_brokers(cluster: GroupCluster) -> None:
    # AutoTopicCreationManager.hasEnoughLiveBrokers: 2 brokers alive, replication factor 3 ->
    # nothing created (never at a smaller factor, for good), COORDINATOR_NOT_AVAILABLE.
    async def scenario() -> None:
        broker = Broker(cluster, offsets_topic_num_partitions=3, offsets_topic_replication_factor=3)
        request = FindCoordinatorRequest(version=0, key=GROUP)
        first = await broker.send(ApiKey.FIND_COORDINATOR, 0, request)
        assert (first.error_code, first.node_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        await settle()
        assert broker.controller.calls == []
        assert OFFSETS_TOPIC not in cluster.image.topics.by_name

    run(scenario)


def test_find_coordinator_v4_batches_and_key_types(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        batched = FindCoordinatorRequest(version=4, key_type=0, coordinator_keys=["a", "b"])
        response = await broker.send(ApiKey.FIND_COORDINATOR, 4, batched)
        assert [(c.key, c.error_code, c.node_id) for c in response.coordinators] == [
            ("a", Errors.NONE, LOCAL),
            ("b", Errors.NONE, LOCAL),
        ]
        # Transactional ids (key type 1): tests/broker/test_handlers_txn_coordinator.py.
        unknown = FindCoordinatorRequest(version=3, key="x", key_type=7)
        response = await broker.send(ApiKey.FIND_COORDINATOR, 3, unknown)
        assert response.error_code == Errors.INVALID_REQUEST

    run(scenario)


# ------------------------------------------------------------------ the group life cycle


@pytest.mark.parametrize("version", [0, 3, 4, 7, 9])
def test_join_versions(cluster: GroupCluster, version: int) -> None:
    # JoinGroup v4+ first answers MEMBER_ID_REQUIRED (KIP-394); v0-v3 join at once
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        first = await broker.send(ApiKey.JOIN_GROUP, version, join(version))
        if version >= 4:
            assert first.error_code == Errors.MEMBER_ID_REQUIRED
            assert first.member_id.startswith("harness-")
            first = await broker.send(ApiKey.JOIN_GROUP, version, join(version, first.member_id))
        assert (first.error_code, first.generation_id, first.protocol_name) == (
            Errors.NONE,
            1,
            "range",
        )
        assert [(m.member_id, m.metadata) for m in first.members] == [
            (first.member_id, b"subscription")
        ]
        if version >= 7:
            assert first.protocol_type == "consumer"

    run(scenario)


def test_group_life_cycle(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        member, generation = await join_and_sync(broker)
        beat = HeartbeatRequest(
            version=4,
            group_id=GROUP,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
        )
        assert (await broker.send(ApiKey.HEARTBEAT, 4, beat)).error_code == Errors.NONE
        committed = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 42, member, generation))
        assert committed.topics[0].partitions[0].error_code == Errors.NONE
        fetched = await broker.send(ApiKey.OFFSET_FETCH, 7, fetch_v7(["pets"]))
        partition = fetched.topics[0].partitions[0]
        assert (partition.committed_offset, partition.committed_leader_epoch) == (42, 3)
        assert partition.metadata == "meta"
        described = await broker.send(
            ApiKey.DESCRIBE_GROUPS,
            5,
            DescribeGroupsRequest(version=5, groups=[GROUP], include_authorized_operations=False),
        )
        group = described.groups[0]
        assert (group.group_state, group.protocol_data) == ("Stable", "range")
        assert group.members[0].member_assignment == b"pets-0"
        assert group.members[0].client_id == "harness"
        listed = await broker.send(
            ApiKey.LIST_GROUPS, 4, ListGroupsRequest(version=4, states_filter=["Stable"])
        )
        assert [(g.group_id, g.group_state) for g in listed.groups] == [(GROUP, "Stable")]
        leave = LeaveGroupRequest(
            version=5,
            group_id=GROUP,
            members=[
                LeaveGroupRequest.MemberIdentity(
                    member_id=member, group_instance_id=None, reason=None
                )
            ],
        )
        left = await broker.send(ApiKey.LEAVE_GROUP, 5, leave)
        assert left.error_code == Errors.NONE and left.members[0].error_code == Errors.NONE
        await settle()
        listed = await broker.send(ApiKey.LIST_GROUPS, 4, ListGroupsRequest(version=4))
        assert [(g.group_id, g.group_state) for g in listed.groups] == [(GROUP, "Empty")]

    run(scenario)


def test_second_member_rebalances_and_both_get_assignments(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        leader, generation = await join_and_sync(broker)
        joining = broker.send_soon(ApiKey.JOIN_GROUP, 3, join(3))
        await settle()
        assert not joining.done()  # parked until the leader rejoins
        beat = HeartbeatRequest(
            version=0, group_id=GROUP, generation_id=generation, member_id=leader
        )
        assert (await broker.send(ApiKey.HEARTBEAT, 0, beat)).error_code == (
            Errors.REBALANCE_IN_PROGRESS
        )
        rejoined = await broker.send(ApiKey.JOIN_GROUP, 3, join(3, leader))
        follower = await joining
        assert rejoined.generation_id == follower.generation_id == generation + 1
        assert len(rejoined.members) == 2 and follower.members == []

    run(scenario)


# ------------------------------------------------------------------ errors


def test_commit_to_unknown_topic(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        response = await broker.send(ApiKey.OFFSET_COMMIT, 2, commit(2, 5, topic="nope"))
        assert response.topics[0].partitions[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION

    run(scenario)


def test_not_coordinator_where_another_broker_leads(cluster: GroupCluster) -> None:
    # OffsetFetch v1 carries the group error on each partition, v2+ once (getErrorResponse)
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here(leader=OTHER))
        await settle()
        v1 = OffsetFetchRequest(
            version=1,
            group_id=GROUP,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="pets", partition_indexes=[0])],
        )
        response = await broker.send(ApiKey.OFFSET_FETCH, 1, v1)
        assert response.topics[0].partitions[0].error_code == Errors.NOT_COORDINATOR
        response = await broker.send(ApiKey.OFFSET_FETCH, 7, fetch_v7(["pets"]))
        assert (response.error_code, response.topics) == (Errors.NOT_COORDINATOR, [])
        joined = await broker.send(ApiKey.JOIN_GROUP, 4, join(4))
        assert joined.error_code == Errors.NOT_COORDINATOR

    run(scenario)


def test_offset_fetch_v8_several_groups(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        await broker.send(ApiKey.OFFSET_COMMIT, 9, commit(9, 17))
        group_class = OffsetFetchRequest.OffsetFetchRequestGroup
        request = OffsetFetchRequest(
            version=9,
            require_stable=True,
            groups=[
                group_class(group_id=GROUP, member_id=None, member_epoch=-1, topics=None),
                group_class(
                    group_id="empty",
                    member_id=None,
                    member_epoch=-1,
                    topics=[
                        group_class.OffsetFetchRequestTopics(name="pets", partition_indexes=[0])
                    ],
                ),
            ],
        )
        response = await broker.send(ApiKey.OFFSET_FETCH, 9, request)
        found = {
            g.group_id: [
                (t.name, p.partition_index, p.committed_offset)
                for t in g.topics
                for p in t.partitions
            ]
            for g in response.groups
        }
        assert found == {GROUP: [("pets", 0, 17)], "empty": [("pets", 0, -1)]}

    run(scenario)


# ------------------------------------------------------------------ persistence and leadership


def test_commits_are_kafka_records_a_new_coordinator_loads(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        member, generation = await join_and_sync(broker)
        await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 99, member, generation))
        hosted = cluster.replica_manager.get_partition(TopicPartition(OFFSETS_TOPIC, 0))
        assert hosted is not None
        replay = OffsetsReplay()
        await read_partition_records(hosted.log, replay.replay, chunk_bytes=100)
        assert replay.records == 2  # the group record with its assignment, the commit
        loaded = replay.loaded(now_ms=0)
        [group] = loaded.groups
        assert (group.group_id, group.generation_id, list(group.members)) == (
            GROUP,
            generation,
            [member],
        )
        assert group.offset(TopicPartition("pets", 0)).offset == 99  # type: ignore[union-attr]
        # A new leader epoch: the broker reloads the partition from the log.
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=LOCAL))
        await settle()
        fetched = await broker.send(ApiKey.OFFSET_FETCH, 7, fetch_v7(None))
        assert fetched.topics[0].partitions[0].committed_offset == 99
        beat = HeartbeatRequest(
            version=1, group_id=GROUP, generation_id=generation, member_id=member
        )
        assert (await broker.send(ApiKey.HEARTBEAT, 1, beat)).error_code == Errors.NONE

    run(scenario)


def test_losing_leadership_unloads_and_answers_waiters(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        leader, _ = await join_and_sync(broker)
        joining = broker.send_soon(ApiKey.JOIN_GROUP, 3, join(3))
        await settle()
        cluster.publish(
            PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=OTHER, isr=(OTHER,))
        )
        parked = await joining
        assert parked.error_code == Errors.NOT_COORDINATOR
        again = await broker.send(ApiKey.JOIN_GROUP, 3, join(3, leader))
        assert again.error_code == Errors.NOT_COORDINATOR

    run(scenario)


def test_session_expiry_through_the_shell_timer(cluster: GroupCluster) -> None:
    async def scenario() -> None:
        broker = Broker(cluster)
        cluster.publish(*offsets_led_here())
        await settle()
        member, generation = await join_and_sync(broker)
        broker.clock.now_ms += 10_000
        broker.shell.poll()  # what the timer does when the real clock gets there
        await settle()
        beat = HeartbeatRequest(
            version=1, group_id=GROUP, generation_id=generation, member_id=member
        )
        assert (await broker.send(ApiKey.HEARTBEAT, 1, beat)).error_code == (
            Errors.UNKNOWN_MEMBER_ID
        )
        await broker.shell.shutdown()

    run(scenario)


def test_commit_without_enough_replicas_is_coordinator_not_available(
    cluster: GroupCluster,
) -> None:
    # acks=-1 appends: min.insync.replicas 2 with an ISR of 1 fails with NOT_ENOUGH_REPLICAS,
    # which storeOffsets maps to COORDINATOR_NOT_AVAILABLE (the client retries)
    async def scenario() -> None:
        broker = Broker(cluster)
        config = ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=OFFSETS_TOPIC,
            name="min.insync.replicas",
            value="2",
        )
        cluster.publish(*offsets_led_here(), config)
        await settle()
        response = await broker.send(ApiKey.OFFSET_COMMIT, 8, commit(8, 5))
        assert response.topics[0].partitions[0].error_code == Errors.COORDINATOR_NOT_AVAILABLE
        fetched = await broker.send(ApiKey.OFFSET_FETCH, 7, fetch_v7(["pets"]))
        assert fetched.topics[0].partitions[0].committed_offset == -1

    run(scenario)
