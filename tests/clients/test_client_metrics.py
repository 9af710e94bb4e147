"""KIP-714 client-metrics subscriptions with kafka-python's ``KafkaAdminClient`` against a real
cluster: several subscriptions in one IncrementalAlterConfigs (one controller call, each
resource on its own), read back with DescribeConfigs, listed with ListClientMetricsResources
(``list_config_resources``, API 74 v0), and gone from the list once their keys are deleted —
the round trip ``kafka-client-metrics.sh --alter / --describe / --list`` makes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS


def eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not check():
        assert time.monotonic() < deadline, f"not within {TIMEOUT_S}s: {what}"
        time.sleep(0.2)


@pytest.fixture
def client(cluster: DevCluster) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        yield admin
    finally:
        admin.close()


def subscriptions(client: KafkaAdminClient) -> list[str]:
    listed: dict[str, list[str]] = client.list_config_resources()
    return sorted(listed.get("client_metrics", []))


def test_subscriptions_altered_described_listed_and_deleted(client: KafkaAdminClient) -> None:
    producers, consumers = unique_topic("producers"), unique_topic("consumers")
    answer = client.alter_configs(
        [
            ConfigResource(
                CLIENT_METRICS,
                producers,
                configs={"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
            ),
            ConfigResource(
                CLIENT_METRICS, consumers, configs={"match": "client_software_name=apache-.*"}
            ),
            ConfigResource(CLIENT_METRICS, unique_topic("bad"), configs={"interval.ms": "50"}),
        ],
        incremental=True,
        # kafka-python checks keys against DescribeConfigs, which lists only a subscription's
        # stored keys (ConfigHelper), so a new subscription's keys are "unknown" to it.
        raise_on_unknown=False,
    )
    results: dict[str, str] = answer["client_metrics"]
    assert results[producers] == results[consumers] == "OK"
    (bad,) = (result for name, result in results.items() if name not in (producers, consumers))
    assert "InvalidRequestError" in bad and "between 100 and 3600000" in bad

    eventually(lambda: {producers, consumers} <= set(subscriptions(client)), "both listed")
    described: dict[str, Any] = client.describe_configs(
        [ConfigResource(CLIENT_METRICS, producers)]
    )["client_metrics"][producers]
    assert {name: entry["value"] for name, entry in described.items()} == {
        "interval.ms": "1000",
        "metrics": "org.apache.kafka.producer.",
    }

    deleted = client.alter_configs(
        [
            ConfigResource(
                CLIENT_METRICS, consumers, configs={"match": (AlterConfigOp.DELETE, None)}
            )
        ],
        incremental=True,
    )
    assert deleted == {"client_metrics": {consumers: "OK"}}
    eventually(lambda: consumers not in subscriptions(client), "deleted subscription unlisted")
    assert producers in subscriptions(client)
