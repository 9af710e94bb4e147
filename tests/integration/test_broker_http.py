"""The broker's HTTP API served for real on a free 127.0.0.1 port (aiohttp server and client)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from pykraft.broker.http import (
    PROMETHEUS_CONTENT_TYPE,
    BrokerHttpApi,
    BrokerHttpServer,
    BrokerStatus,
    PartitionRow,
    ReplicaRole,
)
from pykraft.broker.lifecycle import BrokerLifecycle, BrokerState
from pykraft.broker.metrics import BrokerMetrics

pytestmark = pytest.mark.integration

ROW = PartitionRow(
    topic="pets", partition=0, role=ReplicaRole.LEADER, leader_epoch=4,
    log_start_offset=0, log_end_offset=12, high_watermark=12, isr=(1, 2),
)  # fmt: skip


def test_serves_health_metrics_and_replicas_on_loopback() -> None:
    async def scenario() -> None:
        lifecycle = BrokerLifecycle(BrokerState.RECOVERY)
        metrics = BrokerMetrics()
        api = BrokerHttpApi(
            status=lambda: BrokerStatus(node_id=3, state=lifecycle.state, metadata_offset=17),
            metrics_text=metrics.render,
            partitions=lambda: [ROW],
        )
        server = BrokerHttpServer(api, host="127.0.0.1", port=0, bearer_token="t0ken")
        await server.start()
        base = f"http://127.0.0.1:{server.port}"
        auth = {"Authorization": "Bearer t0ken"}
        try:
            async with aiohttp.ClientSession() as session:
                async with session.get(base + "/healthz") as response:
                    assert response.status == 503
                    assert (await response.json())["state"] == "RECOVERY"
                lifecycle.become(BrokerState.RUNNING)
                async with session.get(base + "/healthz") as response:
                    assert response.status == 200
                async with session.get(base + "/metrics", headers=auth) as response:
                    assert response.headers["Content-Type"] == PROMETHEUS_CONTENT_TYPE
                    assert "pykraft_metadata_offset -1" in await response.text()
                async with session.get(base + "/v1/partitions", headers=auth) as response:
                    assert (await response.json())["partitions"][0]["high_watermark"] == 12
                async with session.get(base + "/v1/partitions") as response:
                    assert response.status == 401
                    assert (await response.json())["error"] == "UNAUTHORIZED"
                async with session.get(base + "/v1/broker", headers=auth) as response:
                    assert (await response.json())["metadata_offset"] == 17
        finally:
            await server.close()

    asyncio.run(asyncio.wait_for(scenario(), timeout=20))
