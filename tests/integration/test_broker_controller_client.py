"""ControllerClient and MetadataLoader against real controller processes on free ports:
NOT_CONTROLLER redirects, failover to a new leader, typed errors, an unreachable quorum, and a
broker's metadata read that starts below the retained window (snapshot, then the log)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import (
    ControllerClient,
    ControllerRequestError,
    SnapshotRequiredError,
)
from pykraft.broker.metadata_loader import MetadataLoader
from pykraft.free_ports import pick_free_ports as free_ports
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.records import BrokerEndpoint, uuid_to_kafka_string
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


def test_writes_follow_the_leader_and_survive_its_failure(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(size=3)
    leader = cluster.wait_for_leader()
    followers = [c for c in cluster.controllers if c is not leader]
    cluster.register_brokers([1])

    async def scenario() -> float:
        # Bootstrapped with one follower only: every write is redirected (421 + leader URL).
        async with ControllerClient([followers[0].url, followers[1].url]) as client:
            created = await client.create_topic(
                CreatableTopic(name="pets", num_partitions=2), validate_only=False
            )
            assert created.num_partitions == 2 and created.replication_factor == 1
            assert client.leader_url == leader.url
            assert [t.name for t in await client.list_topics()] == ["pets"]
            with pytest.raises(ControllerRequestError) as exists:
                await client.create_topic(CreatableTopic(name="pets"), validate_only=False)
            assert (exists.value.error, exists.value.status) == ("TOPIC_ALREADY_EXISTS", 409)
            assert exists.value.message == "Topic 'pets' already exists."
            with pytest.raises(ControllerRequestError) as missing:
                await client.describe_topic("cats")
            assert missing.value.error == "UNKNOWN_TOPIC_OR_PARTITION"

            leader.kill()
            started = time.monotonic()
            # Idempotent for one incarnation id: retried through the election.
            reply = await client.register_broker(
                broker_id=2,
                incarnation_id=uuid_to_kafka_string(bytes(range(16))),
                endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9094),),
                rack=None,
            )
            assert reply.broker_epoch > 0 and client.leader_url != leader.url
            return time.monotonic() - started

    failover_s = run(scenario())
    assert failover_s < 20


def test_an_unreachable_quorum_is_a_controller_error_within_the_deadline() -> None:
    dead = [f"127.0.0.1:{port}" for port in free_ports(2)]

    async def scenario() -> None:
        async with ControllerClient(dead, deadline_s=1.0) as client:
            with pytest.raises(ControllerError) as failure:
                await client.list_topics()
            assert failure.value.error == "REQUEST_TIMED_OUT"

    started = time.monotonic()
    run(scenario())
    assert time.monotonic() - started < 5


def test_a_silent_controller_is_a_controller_error_within_the_heartbeat_deadline() -> None:
    """A controller partitioned away takes the request and never answers: the heartbeat fails
    within its deadline, not the transport's per-request timeout, and the next call goes to
    another controller (here the second, as silent)."""

    async def scenario() -> list[float]:
        accepted: list[asyncio.StreamWriter] = []

        async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # read nothing, answer nothing

        servers = [await asyncio.start_server(hold, "127.0.0.1", 0) for _ in range(2)]
        urls = [f"127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
        took = []
        try:
            async with ControllerClient(urls) as client:
                for _ in range(2):
                    started = time.monotonic()
                    with pytest.raises(ControllerError) as failure:
                        await client.heartbeat(
                            broker_id=1, broker_epoch=1, current_metadata_offset=0,
                            want_fence=False, want_shut_down=False, deadline_s=1.0,
                        )  # fmt: skip
                    assert failure.value.error == "REQUEST_TIMED_OUT"
                    took.append(time.monotonic() - started)
        finally:
            for writer in accepted:
                writer.close()
            for server in servers:
                server.close()
        assert len(accepted) == 2  # one connection to each controller
        return took

    assert all(seconds < 3 for seconds in run(scenario()))


def test_a_broker_far_behind_loads_the_snapshot_then_the_log(cluster_factory: Any) -> None:
    # A tiny retained window and frequent snapshots, so offset 0 is long gone.
    cluster: Cluster = cluster_factory(
        size=1,
        extra={
            "metadata.log.window.records": "10",
            "metadata.log.max.records.between.snapshots": "20",
        },
    )
    controller = cluster.wait_for_leader()
    cluster.register_brokers([1])
    names = [f"topic-{i}" for i in range(12)]
    for name in names:
        cluster.request("POST", "/v1/topics", {"name": name, "partitions": 2})
    deadline = time.monotonic() + 20
    while not controller.get("/v1/metadata/snapshots")["snapshots"]:
        assert time.monotonic() < deadline, "no snapshot written"
        time.sleep(0.1)

    async def scenario() -> None:
        async with ControllerClient([controller.url]) as client:
            with pytest.raises(SnapshotRequiredError) as required:
                await client.fetch_records(0, max_wait_ms=0, max_records=100)
            assert required.value.snapshot is not None
            loader = MetadataLoader(client)
            while loader.publish_count == 0:
                await loader.poll_once()
            assert loader.caught_up and loader.load_errors == 0
            image = loader.image
            assert sorted(image.topics.by_name) == sorted(names)
            assert image.topics.partition_count() == 24
            assert 1 in image.cluster.brokers
            assert image.offset >= required.value.snapshot.end_offset - 1

    run(scenario())


def test_a_broker_polling_a_standby_is_pointed_at_the_active_controller(
    cluster_factory: Any,
) -> None:
    """Only the active controller watches a broker's connections, so a killed broker is fenced
    within ``pykraft.broker.exited.grace.ms`` only if its long poll is there: a broker whose
    last known leader died and whose next bootstrap controller is a standby must move its polls
    (quorum/broker_channels.py). A standby answers a registered broker's poll naming
    the leader in its answer; anyone else's poll it serves as before."""
    # No NoOpRecord every 500 ms: a poll at the log's end waits its whole time for a write.
    cluster: Cluster = cluster_factory(size=3, extra={"metadata.max.idle.interval.ms": "60000"})
    leader = cluster.wait_for_leader()
    standby = next(c for c in cluster.controllers if c is not leader)
    epoch = cluster.register_brokers([1])[1]

    async def scenario() -> None:
        async with ControllerClient([standby.url]) as tool:
            end = 0
            while page := await tool.fetch_records(end, max_wait_ms=500, max_records=100):
                if not page.batches:  # the standby has all the leader committed
                    break
                end = page.next_offset
            assert end > 0 and tool.leader_url is None
        async with ControllerClient([standby.url]) as broker:
            broker.identify_as(lambda: (1, epoch))
            page = await broker.fetch_records(end, max_wait_ms=300, max_records=10)
            assert page.batches == () and broker.leader_url == leader.url
            # The next poll is the leader's: a long poll it holds until records come.
            started = time.monotonic()
            waiting = asyncio.ensure_future(
                broker.fetch_records(end, max_wait_ms=5000, max_records=10)
            )
            await asyncio.sleep(0.5)
            assert not waiting.done()
            cluster.request("POST", "/v1/topics", {"name": "woken", "partitions": 1})
            woken = await waiting
            assert woken.batches and time.monotonic() - started < 4.5

    run(scenario())
