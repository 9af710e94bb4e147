"""Real brokers with secure listeners for the hostile and client suites: one controller, and
brokers with PLAINTEXT, SASL_PLAINTEXT, SSL (client certificates required) and SASL_SSL
listeners over a throwaway CA (``tests.tls_material``). Processes are stopped by the
integration fixtures (``cluster_factory``, ``brokers``), also when a test fails."""

from __future__ import annotations

import ssl
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient

from pykraft.dev import internal_topic_properties
from pykraft.free_ports import pick_free_ports as free_ports
from tests.hostile.conftest import SingleBroker
from tests.integration.conftest import Cluster
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess
from tests.tls_material import TlsMaterial, make_tls_material, secure_listener_properties


class SecureBroker(SingleBroker):
    def __init__(
        self, cluster: Cluster, broker: BrokerProcess, root: Path, material: TlsMaterial,
        ports: tuple[int, int, int],
    ) -> None:  # fmt: skip
        super().__init__(cluster, broker, root)
        self.material = material
        self.sasl_port, self.ssl_port, self.sasl_ssl_port = ports

    def client_tls(self, with_certificate: bool = True) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.material.ca_path))
        if with_certificate:
            context.load_cert_chain(str(self.material.clients["alice"].path))
        return context

    def assert_still_serves_sasl(self) -> None:
        """The plain listener serves (SingleBroker's check) and a PLAIN login still works."""
        self.assert_still_serves()
        admin = KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{self.sasl_port}", security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN", sasl_plain_username="alice",
            sasl_plain_password="alice-secret", request_timeout_ms=10_000,
        )  # fmt: skip
        try:
            assert isinstance(admin.list_topics(), list)
        finally:
            admin.close()


def start_secure_brokers(
    cluster_factory: Any,
    brokers: list[BrokerProcess],
    root: Path,
    count: int = 1,
    extra: dict[str, str] | None = None,
    controller_extra: dict[str, str] | None = None,
) -> list[SecureBroker]:
    """``extra``: properties for every broker; ``controller_extra``: for the controller."""
    material = make_tls_material(root)
    controller_properties = {**CONTROLLER_PROPERTIES, **(controller_extra or {})}
    cluster: Cluster = cluster_factory(size=1, extra=controller_properties)
    cluster.wait_for_leader()
    started = []
    for index in range(count):
        broker = BrokerProcess(root, 10 + index, cluster.controllers[0].url)
        sasl, tls, sasl_tls = free_ports(3)
        properties = secure_listener_properties(material, broker.kafka_port, sasl, tls, sasl_tls)
        properties.update(internal_topic_properties(count))
        properties.update(extra or {})
        with broker.config_path.open("a") as config:
            config.writelines(f"{key}={value}\n" for key, value in properties.items())
        brokers.append(broker)
        broker.start()
        started.append(SecureBroker(cluster, broker, root, material, (sasl, tls, sasl_tls)))
    for secure in started:
        secure.broker.wait_running()
    return started


def confluent_round_trip(
    config: dict[str, Any], topic: str, values: list[bytes], timeout_s: float
) -> list[bytes]:
    """Produce ``values`` with confluent-kafka (acks=all) under ``config``'s security, then read
    them back as a fresh group from the earliest offset: what each secure-client test checks."""
    producer = Producer({**config, "acks": "all", "message.timeout.ms": int(timeout_s * 1000)})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(timeout_s) == 0
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(received) < len(values) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append(message.value() or b"")
    finally:
        consumer.close()
    return received
