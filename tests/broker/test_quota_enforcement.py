"""Client quotas enforced: Produce and consumer Fetch through ``KafkaApis`` answer with
``throttle_time_ms`` and mute the connection (``ChannelThrottles``), a throttled Fetch is answered
empty (Kafka's ``FetchContext.getThrottledResponse``), a follower's Fetch is never client-quota'd,
throttles reach ``/metrics``; and the listener reads nothing from a muted connection until the
throttle expires (KIP-219), on simulated time."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.handlers.services import random_session_id
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.quotas_shell import ClientQuotas
from pykraft.metadata.client_quotas import entity_data, quota_entity
from pykraft.metadata.records import ClientQuotaRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from pykraft.replica.fetch_sessions import FetchSessionCache
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import Cluster, batch, encode, pets_led_here, services
from tests.broker.test_handlers_registry import dispatch
from tests.broker.wire_client import correlation_id, read_frame, request_frame
from tests.fake_clock import FakeClock

CLIENT_ID = "harness"  # the client id of replica_harness.request_context


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_led_here())


def set_quota(cluster: Cluster, key: str, value: float, client_id: str | None = CLIENT_ID) -> None:
    entity = entity_data(quota_entity([("client-id", client_id)]))
    cluster.publish(ClientQuotaRecord(entity=entity, key=key, value=value))


def quota_apis(cluster: Cluster, **overrides: Any) -> tuple[KafkaApis, ClientQuotas, BrokerMetrics]:
    metrics = BrokerMetrics()
    quotas = ClientQuotas(
        lambda: cluster.image.client_quotas,
        cluster.clock.monotonic_ms,
        ChannelThrottles(cluster.clock.wait),
        metrics=metrics,
    )
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster, client_quotas=quotas, **overrides)))
    return apis, quotas, metrics


def produce_request(size: int) -> bytes:
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=0, records=bytes(batch(b"x" * size))
    )
    request = ProduceRequest(
        version=10, transactional_id=None, acks=1, timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name="pets", partition_data=[partition])],
    )  # fmt: skip
    return encode(request, 10)


def produce(apis: KafkaApis, size: int) -> Any:
    return ProduceResponse.decode(
        dispatch(apis, ApiKey.PRODUCE, 10, produce_request(size)), version=10
    )


def fetch(
    apis: KafkaApis, replica_id: int = -1, session_epoch: int = -1, session_id: int = 0
) -> Any:
    """A fetch of pets-0 from offset 0; an incremental one (session_epoch > 0) names nothing."""
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20,
    )  # fmt: skip
    topics = (
        [] if session_epoch > 0 else [FetchRequest.FetchTopic(topic="pets", partitions=[partition])]
    )
    request = FetchRequest(
        version=12, replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=session_id, session_epoch=session_epoch,
        topics=topics, forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    return FetchResponse.decode(dispatch(apis, ApiKey.FETCH, 12, encode(request, 12)), version=12)


def test_produce_over_its_byte_rate_is_throttled_and_its_connection_muted(
    cluster: Cluster,
) -> None:
    apis, quotas, metrics = quota_apis(cluster)
    set_quota(cluster, "producer_byte_rate", 1000.0)
    first = produce(apis, 100)
    assert first.throttle_time_ms == 0
    assert first.responses[0].partition_responses[0].error_code == 0
    # ~11 KB within one instant against 1,000 B/s judged over 10 s: throttled, but appended.
    second = produce(apis, 10_000)
    assert second.throttle_time_ms > 0
    assert second.responses[0].partition_responses[0].error_code == 0
    now = cluster.clock.monotonic_ms()
    assert quotas.throttles.muted_for_ms("local-remote-0", now) == second.throttle_time_ms
    assert metrics.client_quota_throttles.value("produce") == 1
    assert metrics.client_quota_throttle_time.value("produce") == second.throttle_time_ms
    assert "pykraft_client_quota_throttles_total" in metrics.render()


def test_another_client_id_is_not_held_to_the_quota(cluster: Cluster) -> None:
    apis, _, _ = quota_apis(cluster)
    set_quota(cluster, "producer_byte_rate", 10.0, client_id="someone-else")
    assert produce(apis, 10_000).throttle_time_ms == 0


def test_a_throttled_fetch_is_answered_empty_and_not_counted(cluster: Cluster) -> None:
    apis, quotas, _ = quota_apis(cluster)
    produce(apis, 5000)
    set_quota(cluster, "consumer_byte_rate", 100.0)
    throttled = fetch(apis)
    assert throttled.throttle_time_ms > 0
    assert throttled.responses == []
    # The throttled bytes were taken back: ~5 KB now is ~510 B/s over the 10 s window, under
    # 600 B/s — had the first 5 KB stayed counted, it would be ~1,020 B/s and throttled again.
    set_quota(cluster, "consumer_byte_rate", 600.0)
    answer = fetch(apis)
    assert answer.throttle_time_ms == 0
    assert len(answer.responses[0].partitions[0].records) > 5000
    assert quotas.fetch.throttled_total == 1


def test_a_throttled_full_fetch_opens_no_fetch_session(cluster: Cluster) -> None:
    """``FullFetchContext.getThrottledResponse``: empty, session id 0, no session kept."""
    sessions: FetchSessionCache[Any, Any] = FetchSessionCache(random_session_id)
    apis, _, _ = quota_apis(cluster, fetch_sessions=sessions)
    produce(apis, 5000)
    set_quota(cluster, "consumer_byte_rate", 100.0)
    throttled = fetch(apis, session_epoch=0)
    assert throttled.throttle_time_ms > 0
    assert (throttled.session_id, sessions.sessions) == (0, {})
    set_quota(cluster, "consumer_byte_rate", 1e9)
    opened = fetch(apis, session_epoch=0)
    assert opened.throttle_time_ms == 0 and list(sessions.sessions) == [opened.session_id]


def test_a_throttled_incremental_fetch_keeps_its_session_as_it_was(cluster: Cluster) -> None:
    """``IncrementalFetchContext.getThrottledResponse`` (Kafka's FetchSession.scala): empty,
    with the session's id; the session lives on, not updated, so the next incremental fetch
    is answered the records the throttled one held back."""
    sessions: FetchSessionCache[Any, Any] = FetchSessionCache(random_session_id)
    apis, _, _ = quota_apis(cluster, fetch_sessions=sessions)
    opened = fetch(apis, session_epoch=0)  # an empty log: high watermark 0
    assert opened.session_id != 0 and opened.responses[0].partitions[0].high_watermark == 0
    produce(apis, 5000)
    set_quota(cluster, "consumer_byte_rate", 100.0)
    throttled = fetch(apis, session_epoch=1, session_id=opened.session_id)
    assert throttled.throttle_time_ms > 0
    assert (throttled.error_code, throttled.session_id, throttled.responses) == (
        0, opened.session_id, [],
    )  # fmt: skip
    set_quota(cluster, "consumer_byte_rate", 1e9)
    answer = fetch(apis, session_epoch=2, session_id=opened.session_id)
    assert (answer.error_code, answer.session_id) == (0, opened.session_id)
    [partition] = answer.responses[0].partitions
    assert partition.high_watermark == 1 and len(partition.records) > 5000


def test_a_followers_fetch_is_not_client_quotad(cluster: Cluster) -> None:
    apis, _, _ = quota_apis(cluster)
    produce(apis, 5000)
    set_quota(cluster, "consumer_byte_rate", 1.0)
    assert fetch(apis, replica_id=2).throttle_time_ms == 0


def test_channel_throttles_extend_expire_and_forget() -> None:
    clock = FakeClock()
    throttles = ChannelThrottles(clock.wait)
    throttles.throttle("a", 500)
    throttles.throttle("a", 300)  # never shortened
    assert throttles.muted_for_ms("a", 100) == 400
    assert throttles.muted_for_ms("a", 500) == 0 and len(throttles) == 0
    throttles.throttle("b", 1000)
    throttles.forget("b")
    assert len(throttles) == 0
    throttles.throttle("c", 2500)
    asyncio.run(throttles.wait_until_unmuted("c", clock.monotonic_ms))
    assert clock.now_ms == 2500


def test_the_listener_reads_nothing_from_a_muted_connection_until_it_expires() -> None:
    """KIP-219: the throttled response leaves at once; the next request is dispatched only
    after the throttle (5 s of simulated time) has passed."""

    async def scenario() -> None:
        clock = FakeClock()
        throttles = ChannelThrottles(clock.wait)
        dispatched_at: dict[int, int] = {}

        async def answer(context: RequestContext, body: memoryview) -> Segments:
            return frame_response(context.header.correlation_id, 0, bytes(body))

        def dispatch_and_throttle(context: RequestContext, body: memoryview) -> Awaitable[Segments]:
            dispatched_at[context.header.correlation_id] = clock.now_ms
            if context.header.correlation_id == 1:
                throttles.throttle(context.connection_id, clock.now_ms + 5000)
            return answer(context, body)

        listener = KafkaListener(
            dispatch_and_throttle, monotonic_ms=clock.monotonic_ms, throttles=throttles
        )
        server_side, client_side = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=server_side)
        task = asyncio.create_task(listener.serve_connection(server_reader, server_writer))
        reader, writer = await asyncio.open_connection(sock=client_side)
        writer.write(request_frame(3, 0, 1, b"one") + request_frame(3, 0, 2, b"two"))
        first = await read_frame(reader)
        assert first is not None and correlation_id(first) == 1
        second = await read_frame(reader)
        assert second is not None and correlation_id(second) == 2
        assert dispatched_at == {1: 0, 2: 5000}
        writer.close()
        await listener.close()
        await asyncio.gather(task, return_exceptions=True)
        assert len(throttles) == 0

    asyncio.run(asyncio.wait_for(scenario(), timeout=10))


def test_a_consumer_fetch_is_bounded_by_what_its_quota_allows_in_a_window(
    cluster: Cluster,
) -> None:
    """KafkaApis: fetchMaxBytes = min(request max, getMaxValueInQuotaWindow) — 400 B/s over
    10 s allows 4,000 bytes: the first ~3 KB batch goes, the second waits."""
    apis, _, _ = quota_apis(cluster)
    produce(apis, 3000)
    produce(apis, 3000)
    unbounded = fetch(apis)
    assert unbounded.throttle_time_ms == 0
    both = len(unbounded.responses[0].partitions[0].records)
    set_quota(cluster, "consumer_byte_rate", 400.0)
    bounded = fetch(apis)
    assert bounded.throttle_time_ms == 0
    one = len(bounded.responses[0].partitions[0].records)
    assert 3000 < one < 4000 < both
