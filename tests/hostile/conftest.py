"""The hostile-input suite: one real controller and one real broker on free 127.0.0.1 ports,
attacked with malformed frames, lying batches, bombs, floods and damaged files.

Every case asserts three things: the exact Kafka error code (or HTTP status) of the answer,
that nothing was written (log end offset and segment files unchanged), and that a well-behaved
client (kafka-python) can still read Metadata and produce afterwards (``assert_still_serves``).
Processes are always killed, even when a test fails (the integration fixtures do it).
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from tests.integration.conftest import (  # noqa: F401 (fixtures)
    Cluster,
    HttpError,
    brokers,
    cluster_factory,
    module_brokers,
    module_cluster_factory,
    module_path,
)
from tests.integration.test_broker_process import BrokerProcess, start_cluster, wait_for


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/hostile/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.hostile)


class SingleBroker:
    """A running controller + broker, and the few things every hostile case needs."""

    def __init__(self, cluster: Cluster, broker: BrokerProcess, root: Path) -> None:
        self.cluster = cluster
        self.broker = broker
        self.root = root

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def host_port(self) -> tuple[str, int]:
        return "127.0.0.1", self.broker.kafka_port

    @property
    def log_dir(self) -> Path:
        return self.root / f"broker-{self.broker.node_id}"

    def create_topic(self, name: str, partitions: int = 1, **configs: str) -> None:
        body: dict[str, Any] = {"name": name, "partitions": partitions, "replication_factor": 1}
        if configs:
            body["configs"] = configs
        self.cluster.request("POST", "/v1/topics", body)
        wait_for(lambda: self.cluster.request("GET", f"/v1/topics/{name}"))
        # The controller has it; the broker hosts it once it applied the records (Kafka's
        # CreateTopics returns before that too: a produce in between is UNKNOWN_TOPIC_OR_PARTITION).
        deadline = time.monotonic() + 10
        while not all(self._hosts(name, p) for p in range(partitions)):
            assert time.monotonic() < deadline, f"broker never hosted {name}"
            time.sleep(0.01)

    def _hosts(self, topic: str, partition: int) -> bool:
        try:
            self.log_end_offset(topic, partition)
        except AssertionError:
            return False
        return True

    def ensure_topic(self, name: str) -> None:
        """``create_topic`` for a broker that tests share: the topic may be there already."""
        try:
            self.create_topic(name)
        except HttpError as error:
            if error.status != 409:
                raise

    def partition_files(self, topic: str, partition: int = 0) -> dict[str, str]:
        """name -> sha256 of every file in the partition directory (``nothing was written``)."""
        directory = self.log_dir / f"{topic}-{partition}"
        return {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.iterdir())
            if path.is_file()
        }

    def log_end_offset(self, topic: str, partition: int = 0) -> int:
        """The partition's log end offset as the broker reports it (``/v1/partitions``)."""
        from tests.integration.conftest import http

        for row in http("GET", self.broker.http_url + "/v1/partitions")["partitions"]:
            if row["topic"] == topic and row["partition"] == partition:
                return int(row["log_end_offset"])
        raise AssertionError(f"{topic}-{partition} is not hosted by broker {self.broker.node_id}")

    def assert_still_serves(self) -> None:
        """A well-behaved client still gets Metadata and an acknowledged produce."""
        assert self.broker.process is not None and self.broker.process.poll() is None, (
            self.broker.log_tail()
        )
        topic = f"canary-{uuid.uuid4().hex[:8]}"
        self.create_topic(topic)
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=10_000)
        try:
            assert topic in admin.list_topics()
        finally:
            admin.close()
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=False,
            request_timeout_ms=10_000, max_block_ms=10_000,
        )  # fmt: skip
        try:
            metadata = producer.send(topic, b"still here").get(timeout=15)
        finally:
            producer.close()
        assert metadata.offset == 0


@pytest.fixture
def single_broker(
    cluster_factory: Any,  # noqa: F811 - the integration fixture, re-exported above
    brokers: list[BrokerProcess],  # noqa: F811
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> SingleBroker:
    """One controller and one broker; ``@pytest.mark.broker_properties({...})`` adds lines."""
    marker = request.node.get_closest_marker("broker_properties")
    properties: dict[str, str] = dict(marker.args[0]) if marker else {}
    cluster = start_cluster(cluster_factory, brokers, tmp_path, 1, properties)
    return SingleBroker(cluster, brokers[0], tmp_path)


@pytest.fixture(scope="module")
def module_single_brokers(
    module_cluster_factory: Any,  # noqa: F811
    module_brokers: list[BrokerProcess],  # noqa: F811
    module_path: Path,  # noqa: F811
) -> Callable[[dict[str, str]], SingleBroker]:
    """One controller and broker per set of broker properties, shared by a module's tests:
    for cases that attack over the wire and check before and after (``nothing_written``,
    ``assert_still_serves``), so the broker's earlier cases are part of what it survives."""
    started: dict[frozenset[tuple[str, str]], SingleBroker] = {}

    def get(properties: dict[str, str]) -> SingleBroker:
        key = frozenset(properties.items())
        if key not in started:
            root = module_path / f"broker-set-{len(started)}"
            root.mkdir()
            own: list[BrokerProcess] = []
            try:
                cluster = start_cluster(module_cluster_factory, own, root, 1, properties)
            finally:
                module_brokers.extend(own)  # killed at the module's end, also on failure
            started[key] = SingleBroker(cluster, own[0], root)
        return started[key]

    return get


@pytest.fixture
def shared_single_broker(
    module_single_brokers: Callable[[dict[str, str]], SingleBroker], request: pytest.FixtureRequest
) -> SingleBroker:
    """``single_broker`` shared by a module's cases, one per ``@pytest.mark.broker_properties``;
    a module opts in by defining its ``single_broker`` fixture as this one."""
    marker = request.node.get_closest_marker("broker_properties")
    return module_single_brokers(dict(marker.args[0]) if marker else {})
