"""Issue 16: a live broker's and controller's ``GET /metrics`` carry Kafka's metric names (as the
Prometheus JMX exporter's Kafka rules name them), and the values move when a real client
creates a topic, produces and consumes.

One ``pykraft dev --controllers 1 --brokers 1`` on free ports; confluent-kafka does the client
work. The names checked are the ones ``examples/grafana/pykraft.json`` graphs.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.integration.conftest import ROOT, dev_cluster

pytestmark = pytest.mark.integration

TOPIC = "metered"
MESSAGES = 20
DASHBOARD = ROOT / "examples" / "grafana" / "pykraft.json"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def scrape(url: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample on a /metrics page."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        samples[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return samples


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("metrics") / "cluster"
    with dev_cluster(data_dir) as info:
        yield {
            "bootstrap": str(info["bootstrap_servers"]),
            "broker": str(info["brokers"][0]["http_url"]),
            "controller": str(info["admin_url"]),
        }


def produce_and_consume(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])[TOPIC].result(
        timeout=20
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(MESSAGES):
        producer.produce(TOPIC, value=b"x" * 100, key=str(i).encode())
    assert producer.flush(20) == 0
    # Assigned, not subscribed: no group to join, so no __consumer_offsets to wait for.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "metered", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, partition, 0) for partition in (0, 1)])
    received = 0
    deadline = time.monotonic() + 30
    while received < MESSAGES and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received += 1
    consumer.close()
    assert received == MESSAGES


def test_kafka_names_and_values_that_move_after_a_produce(cluster: dict[str, str]) -> None:
    broker_before = scrape(cluster["broker"])
    controller_before = scrape(cluster["controller"])
    produce_and_consume(cluster["bootstrap"])
    broker = scrape(cluster["broker"])
    controller = scrape(cluster["controller"])

    topic = f'{{topic="{TOPIC}"}}'
    prefix = "kafka_server_brokertopicmetrics_"
    assert broker_before.get(prefix + "messagesin_total" + topic, 0) == 0
    assert broker[prefix + "messagesin_total" + topic] == MESSAGES
    assert broker[prefix + "messagesin_total"] == MESSAGES  # all topics: only this one
    assert broker[prefix + "bytesin_total" + topic] > MESSAGES * 100  # batches: values + framing
    assert broker[prefix + "bytesout_total" + topic] >= broker[prefix + "bytesin_total" + topic]
    assert broker["kafka_server_replicamanager_underreplicatedpartitions"] == 0
    assert broker["kafka_server_replicamanager_leadercount"] >= 2
    assert broker["kafka_server_replicamanager_isrshrinks_total"] == 0
    assert broker["kafka_server_kafkaserver_brokerstate"] == 3  # RUNNING
    produce_count = 'kafka_network_requestmetrics_totaltimems_count{request="Produce"}'
    assert broker[produce_count] >= 1 > broker_before.get(produce_count, 0)
    assert broker['kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}'] > 0

    controller_prefix = "kafka_controller_kafkacontroller_"
    assert controller[controller_prefix + "activecontrollercount"] == 1
    assert controller[controller_prefix + "activebrokercount"] == 1
    assert controller[controller_prefix + "offlinepartitionscount"] == 0
    assert (  # the topic's 2 partitions were created in between (and __consumer_offsets')
        controller[controller_prefix + "globalpartitioncount"]
        >= controller_before[controller_prefix + "globalpartitioncount"] + 2
    )
    assert controller["kafka_server_raftmetrics_current_leader"] == 1
    assert controller['kafka_server_raftmetrics_current_state{current_state="leader"}'] == 1
    assert (
        controller["kafka_server_raftmetrics_high_watermark"]
        > controller_before["kafka_server_raftmetrics_high_watermark"]
    )
    assert controller["kafka_server_raftmetrics_commit_latency_max"] > 0


def test_every_metric_the_dashboard_graphs_is_served(cluster: dict[str, str]) -> None:
    # Request metrics have a series once a request of that kind was served: ask for metadata
    # first, so this test does not depend on running after the one above.
    AdminClient({"bootstrap.servers": cluster["bootstrap"]}).list_topics(timeout=20)
    served = {re.sub(r"\{.*", "", name) for name in scrape(cluster["broker"])}
    served |= {re.sub(r"\{.*", "", name) for name in scrape(cluster["controller"])}
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    graphed = {name for expr in expressions for name in re.findall(r"\b(kafka_[a-z_]+)", expr)}
    assert len(graphed) >= 10
    assert graphed <= served, sorted(graphed - served)
