"""Real Kafka clients against secure listeners of real brokers (one controller; brokers with
PLAINTEXT, SASL_PLAINTEXT, SSL with client certificates required, SASL_SSL; tests/tls_material):

* kafka-python and aiokafka over SASL_PLAINTEXT with PLAIN, and over mutual TLS;
* confluent-kafka and kcat over SASL_SSL with SCRAM-SHA-512 (the listener's bootstrap SCRAM
  users until the metadata image carries KIP-554 credentials);
* a wrong password refused with SASL_AUTHENTICATION_FAILED;
* a replicated topic on two brokers whose followers fetch over an SSL inter-broker listener
  (client certificates required), and over SASL_SSL with SCRAM-SHA-512.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError as AIOKafkaError
from confluent_kafka import KafkaException, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

from tests.integration.conftest import (  # noqa: F401 (fixtures)
    brokers,
    cluster_factory,
    http,
    module_brokers,
    module_cluster_factory,
    module_path,
)
from tests.integration.test_broker_process import BrokerProcess, wait_for
from tests.secure_broker import SecureBroker, confluent_round_trip, start_secure_brokers
from tests.tls_material import PLAIN_USERS, SCRAM_USERS

pytestmark = [pytest.mark.clients, pytest.mark.integration]

TIMEOUT_S = 30.0
MESSAGES = 20


@pytest.fixture(scope="module")
def secure_broker(
    module_cluster_factory: Any,  # noqa: F811
    module_brokers: list[BrokerProcess],  # noqa: F811
    module_path: Path,  # noqa: F811
) -> SecureBroker:
    """Shared by the module's single-broker cases: each works on a topic of its own."""
    return start_secure_brokers(module_cluster_factory, module_brokers, module_path)[0]


def topic_on(broker: SecureBroker, replicas: int = 1) -> str:
    topic = f"secure-{uuid.uuid4().hex[:8]}"
    body = {"name": topic, "partitions": 1, "replication_factor": replicas}
    broker.cluster.request("POST", "/v1/topics", body)
    wait_for(lambda: broker.cluster.request("GET", f"/v1/topics/{topic}"))
    return topic


def values() -> list[bytes]:
    return [b"secret-%d" % i for i in range(MESSAGES)]


def kafka_python_round_trip(topic: str, **security: Any) -> list[bytes]:
    producer = KafkaProducer(
        acks="all", enable_idempotence=False, request_timeout_ms=10_000, max_block_ms=20_000,
        **security,
    )  # fmt: skip
    try:
        for value in values():
            producer.send(topic, value)
        producer.flush(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **security
    )
    try:
        # Stop at the last one expected: the idle timeout only bounds a wait for missing ones.
        return [record.value for record in itertools.islice(consumer, MESSAGES)]
    finally:
        consumer.close()


def sasl_plain(broker: SecureBroker, password: str = PLAIN_USERS["alice"]) -> dict[str, Any]:
    return {
        "bootstrap_servers": f"127.0.0.1:{broker.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": password,
    }


def mutual_tls(broker: SecureBroker) -> dict[str, Any]:
    alice = broker.material.clients["alice"].path
    return {
        "bootstrap_servers": f"127.0.0.1:{broker.ssl_port}",
        "security_protocol": "SSL",
        "ssl_cafile": str(broker.material.ca_path),
        "ssl_certfile": str(alice),
        "ssl_keyfile": str(alice),
    }


def test_kafka_python_sasl_plaintext_plain(secure_broker: SecureBroker) -> None:
    topic = topic_on(secure_broker)
    assert kafka_python_round_trip(topic, **sasl_plain(secure_broker)) == values()


def test_kafka_python_mutual_tls(secure_broker: SecureBroker) -> None:
    topic = topic_on(secure_broker)
    assert kafka_python_round_trip(topic, **mutual_tls(secure_broker)) == values()


def test_kafka_python_wrong_password_is_refused(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    topic = topic_on(secure_broker)
    with pytest.raises(KafkaError):
        KafkaProducer(
            **sasl_plain(secure_broker, "wrong"),
            max_block_ms=5000,
            request_timeout_ms=5000,
            bootstrap_timeout_ms=5000,  # kafka-python waits 30 s for a first broker by default
        )
    # The client logs the broker's SaslAuthenticate answer before it gives up.
    assert (
        "[Error 58] SaslAuthenticationFailedError: SaslAuthenticationFailedError: "
        "Authentication failed: Invalid username or password" in caplog.text
    )
    assert secure_broker.log_end_offset(topic) == 0


async def aiokafka_round_trip(topic: str, **security: Any) -> list[bytes]:
    producer = AIOKafkaProducer(acks="all", request_timeout_ms=10_000, **security)
    await producer.start()
    try:
        for value in values():
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **security)
    await consumer.start()
    received: list[bytes] = []
    try:
        async with asyncio.timeout(TIMEOUT_S):
            while len(received) < MESSAGES:
                batch = await consumer.getmany(timeout_ms=1000)
                received += [r.value for records in batch.values() for r in records if r.value]
    finally:
        await consumer.stop()
    return received


def test_aiokafka_sasl_plaintext_plain(secure_broker: SecureBroker) -> None:
    topic = topic_on(secure_broker)
    security = sasl_plain(secure_broker)
    received = asyncio.run(aiokafka_round_trip(topic, **security))
    assert received == values()


def test_aiokafka_mutual_tls(secure_broker: SecureBroker) -> None:
    topic = topic_on(secure_broker)
    security = mutual_tls(secure_broker)
    context = secure_broker.client_tls(True)
    received = asyncio.run(
        aiokafka_round_trip(
            topic, bootstrap_servers=security["bootstrap_servers"], security_protocol="SSL",
            ssl_context=context,
        )
    )  # fmt: skip
    assert received == values()


def test_aiokafka_wrong_password_is_refused(
    secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    topic = topic_on(secure_broker)
    with pytest.raises(AIOKafkaError):
        asyncio.run(aiokafka_round_trip(topic, **sasl_plain(secure_broker, "wrong")))
    assert (
        "[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid username or "
        "password" in caplog.text
    )


def scram_sasl_ssl(broker: SecureBroker, password: str = SCRAM_USERS["bob"]) -> dict[str, str]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl_port}",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "bob",
        "sasl.password": password,
        "ssl.ca.location": str(broker.material.ca_path),
    }


def test_confluent_kafka_sasl_ssl_scram_sha_512(secure_broker: SecureBroker) -> None:
    topic = topic_on(secure_broker)
    config = scram_sasl_ssl(secure_broker)
    assert confluent_round_trip(config, topic, values(), TIMEOUT_S) == values()


def test_confluent_kafka_wrong_scram_password_is_refused(secure_broker: SecureBroker) -> None:
    errors: list[Any] = []
    producer = Producer({**scram_sasl_ssl(secure_broker, "wrong"), "error_cb": errors.append})
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=5)
    producer.poll(1.0)  # serves error_cb
    assert any(
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512" in error.str()
        for error in errors
    ), errors


def test_kcat_sasl_ssl_scram_sha_512(secure_broker: SecureBroker) -> None:
    executable = shutil.which("kcat")
    assert executable, "kcat is not on PATH: run .ci/install-kcat.sh (Debian package kcat)"
    topic = topic_on(secure_broker)
    options = [
        f"-X{key}={value}"
        for key, value in scram_sasl_ssl(secure_broker).items()
        if key != "bootstrap.servers"
    ]
    common = [executable, "-b", f"127.0.0.1:{secure_broker.sasl_ssl_port}", *options]
    produced = subprocess.run(
        [*common, "-P", "-t", topic], input="one\ntwo\n", capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [*common, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e"], capture_output=True,
        text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["one", "two"]


@pytest.mark.parametrize(
    "inter_broker",
    [
        {"inter.broker.listener.name": "SSL"},
        {
            "inter.broker.listener.name": "SASL_SSL",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="broker" password="broker-secret" user_bob="bob-secret" '
                'user_broker="broker-secret";'
            ),
        },
    ],
    ids=["ssl", "sasl_ssl_scram"],
)
def test_replicated_topic_over_a_secure_inter_broker_listener(
    cluster_factory: Any,  # noqa: F811
    brokers: list[BrokerProcess],  # noqa: F811
    tmp_path: Path,
    inter_broker: dict[str, str],
) -> None:
    first, second = start_secure_brokers(cluster_factory, brokers, tmp_path, 2, inter_broker)
    topic = topic_on(first, replicas=2)
    security = sasl_plain(first)
    security["bootstrap_servers"] = f"127.0.0.1:{first.sasl_port}"
    kafka_python_round_trip(topic, **security)

    # Both replicas hold every record and the ISR has both: the follower fetched them over
    # the secure listener.
    def replicated() -> bool:
        rows = [
            row
            for broker in (first, second)
            for row in http("GET", broker.broker.http_url + "/v1/partitions")["partitions"]
            if row["topic"] == topic
        ]
        leader_isr = [sorted(row["isr"]) for row in rows if row["role"] == "leader"]
        return [row["log_end_offset"] for row in rows] == [MESSAGES, MESSAGES] and leader_isr == [
            [10, 11]
        ]

    until(replicated, "the follower never caught up over the inter-broker listener")


def until(predicate: Any, message: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, message
        time.sleep(0.2)
