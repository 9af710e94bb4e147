"""request_percentage (KIP-124): a handler's running time measured step by step, waits left out
(Kafka's ``requestThreadTimeNanos``); recorded as a percentage of one thread by
``ClientQuotas.record_request`` with the throttle capped at one window
(``ClientRequestQuotaManagerTest``), broker-only APIs exempt; and ``KafkaApis`` answering the
request quota's throttle in a kafka-python response's ``throttle_time_ms``."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.network import KafkaListener, RequestContext
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.broker.quotas_shell import ClientQuotas
from pykraft.broker.request_time import REQUEST_TIME, RequestTime, timed
from pykraft.metadata.client_quotas import entity_data, quota_entity
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ClientQuotaRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.framing import frame_response
from pykraft.protocol.segments import Segments
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import Cluster, pets_led_here, request_context, services
from tests.broker.test_handlers_registry import dispatch
from tests.broker.wire_client import read_frame, request_frame
from tests.fake_clock import FakeClock


class StepClock:
    """Nanoseconds that move only when the test says a step took so long."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_only_running_steps_are_counted() -> None:
    clock = StepClock()
    timer = RequestTime()

    async def handler(gate: asyncio.Event) -> str:
        clock.now += 300  # runs 300 ns
        await gate.wait()  # suspended: not counted
        clock.now += 200  # runs 200 ns
        return "answer"

    async def scenario() -> None:
        gate = asyncio.Event()
        task = asyncio.ensure_future(timed(handler(gate), timer, clock))
        await asyncio.sleep(0)
        clock.now += 1_000_000  # the loop runs others meanwhile
        gate.set()
        assert await task == "answer"

    asyncio.run(scenario())
    assert timer.nanos == 500


def test_errors_and_cancellation_reach_the_handler() -> None:
    timer = RequestTime()
    seen: list[str] = []

    async def failing() -> None:
        raise ValueError("bad body")

    async def waiting() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def scenario() -> None:
        with pytest.raises(ValueError, match="bad body"):
            await timed(failing(), timer)
        task = asyncio.ensure_future(timed(waiting(), timer))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert seen == ["cancelled"]


def quotas_for(percentage: float) -> tuple[ClientQuotas, FakeClock]:
    record = ClientQuotaRecord(
        entity=entity_data(quota_entity([("client-id", None)])),
        key="request_percentage",
        value=percentage,
    )
    image = apply_records(MetadataImage.EMPTY, [record])
    clock = FakeClock()
    return ClientQuotas(
        lambda: image.client_quotas, clock.monotonic_ms, ChannelThrottles(clock.wait)
    ), clock


def context(api_key: ApiKey, version: int = 0) -> RequestContext:
    return request_context(api_key, version)


def test_request_time_is_a_percentage_of_one_thread_and_the_throttle_is_capped() -> None:
    quotas, clock = quotas_for(10.0)
    # 0.5 s of handler time judged over the 10 s minimum window: 5% < 10%.
    assert quotas.record_request(context(ApiKey.METADATA), 500_000_000) == 0
    # Another 1.5 s: 20% of a thread, twice the quota: (20 - 10) / 10 * 10 s, capped at 1 s.
    assert quotas.record_request(context(ApiKey.METADATA), 1_500_000_000) == 1000
    assert quotas.throttles.muted_for_ms("local-remote-0", clock.now_ms) == 1000


def test_broker_only_requests_are_exempt() -> None:
    quotas, _ = quotas_for(0.001)
    assert quotas.record_request(context(ApiKey.WRITE_TXN_MARKERS, 1), 10**12) == 0
    assert quotas.record_request(context(ApiKey.ADD_PARTITIONS_TO_TXN, 4), 10**12) == 0
    assert quotas.record_request(context(ApiKey.ADD_PARTITIONS_TO_TXN, 3), 10**12) > 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_led_here())


def test_kafka_apis_answers_the_request_quotas_throttle(cluster: Cluster) -> None:
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster)))
    recorded: list[tuple[int, int]] = []

    def request_quota(request: RequestContext, nanos: int) -> int:
        recorded.append((request.header.api_key, nanos))
        return 250

    apis.request_quota = request_quota
    request = DescribeClientQuotasRequest(version=1, components=[], strict=False)
    body = bytes(request.encode(version=1))
    # Outside a timed request nothing is recorded.
    answer = DescribeClientQuotasResponse.decode(
        dispatch(apis, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body), version=1
    )
    assert answer.throttle_time_ms == 0 and recorded == []
    token = REQUEST_TIME.set(RequestTime())
    try:
        answer = DescribeClientQuotasResponse.decode(
            dispatch(apis, ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, body), version=1
        )
    finally:
        REQUEST_TIME.reset(token)
    assert answer.throttle_time_ms == 250
    assert [api for api, _ in recorded] == [ApiKey.DESCRIBE_CLIENT_QUOTAS]


@pytest.mark.parametrize("enforcing", [True, False])
def test_the_listener_times_each_request_while_quotas_exist(enforcing: bool) -> None:
    """While client quotas exist, a handler runs in a task that carries its own RequestTime;
    without any, nothing is timed."""

    async def scenario() -> list[RequestTime | None]:
        clock = FakeClock()
        seen: list[RequestTime | None] = []

        async def handler(context: RequestContext, body: memoryview) -> Segments:
            seen.append(REQUEST_TIME.get())
            return frame_response(context.header.correlation_id, 0, b"")

        listener = KafkaListener(
            handler,
            monotonic_ms=clock.monotonic_ms,
            throttles=ChannelThrottles(clock.wait, enforcing=lambda: enforcing),
        )
        server_side, client_side = socket.socketpair()
        server_reader, server_writer = await asyncio.open_connection(sock=server_side)
        task = asyncio.create_task(listener.serve_connection(server_reader, server_writer))
        reader, writer = await asyncio.open_connection(sock=client_side)
        writer.write(request_frame(3, 0, 1, b"a") + request_frame(3, 0, 2, b"b"))
        for _ in range(2):
            assert await read_frame(reader) is not None
        writer.close()
        await listener.close()
        await asyncio.gather(task, return_exceptions=True)
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert REQUEST_TIME.get() is None
    if not enforcing:
        assert seen == [None, None]
        return
    assert len(seen) == 2 and all(isinstance(t, RequestTime) for t in seen)
    assert seen[0] is not seen[1]
