"""A Metadata request behind a Produce on the same connection is answered from the state after
that Produce completed (``broker/network.py``'s ``_after``), as in Kafka, which reads a
connection's next request only after answering the previous one. Issue 18: behind an acks=all
Produce waiting for a killed follower, the answer was made at once and named the dead leader;
made after the Produce (completed by the fencing that shrank its ISR), it names the new one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from pykraft.broker.network import RequestContext
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.segments import Segments
from tests.broker.test_network import Harness, echo_response, run, until
from tests.broker.wire_client import correlation_id, read_frame, request_frame


class Cluster:
    """A leader whose Produce waits until ``fence`` moves the leadership."""

    def __init__(self) -> None:
        self.leader = b"dead"
        self.fenced = asyncio.Event()
        self.started: list[int] = []  # API keys, in the order their handlers ran

    def fence(self) -> None:
        self.leader = b"new"
        self.fenced.set()

    def dispatch(self, context: RequestContext, body: memoryview) -> Awaitable[Segments]:
        return self._handle(context, body)

    async def _handle(self, context: RequestContext, body: memoryview) -> Segments:
        api_key = context.header.api_key
        self.started.append(api_key)
        if api_key in (ApiKey.PRODUCE, ApiKey.FETCH):  # acks=all / a long poll: waits
            await self.fenced.wait()
            return echo_response(context, body)
        return echo_response(context, memoryview(self.leader))


def test_a_metadata_behind_a_waiting_produce_is_answered_after_it() -> None:
    async def scenario() -> None:
        cluster = Cluster()
        harness = Harness(cluster.dispatch)
        reader, writer = await harness.connect()
        writer.write(
            request_frame(ApiKey.PRODUCE, 9, 1, b"records") + request_frame(ApiKey.METADATA, 12, 2)
        )
        await until(lambda: cluster.started == [ApiKey.PRODUCE])
        for _ in range(100):  # the Metadata handler does not start while the Produce waits
            await asyncio.sleep(0)
        assert cluster.started == [ApiKey.PRODUCE]
        cluster.fence()
        frames = [await read_frame(reader) for _ in range(2)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]
        assert [f[4:] for f in frames if f] == [b"records", b"new"]
        await harness.listener.close()

    run(scenario)


def test_a_metadata_behind_other_requests_is_answered_at_once() -> None:
    # A consumer's Fetch long poll: the answer is made at once, sent after the Fetch's.
    async def scenario() -> None:
        cluster = Cluster()
        harness = Harness(cluster.dispatch)
        reader, writer = await harness.connect()
        writer.write(request_frame(ApiKey.FETCH, 12, 1) + request_frame(ApiKey.METADATA, 12, 2))
        await until(lambda: cluster.started == [ApiKey.FETCH, ApiKey.METADATA])
        cluster.fence()
        frames = [await read_frame(reader) for _ in range(2)]
        assert [correlation_id(f) for f in frames if f] == [1, 2]
        assert frames[1] is not None and frames[1][4:] == b"dead"
        await harness.listener.close()

    run(scenario)
