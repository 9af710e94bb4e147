"""Configs changed with real admin clients and seen in effect without a restart (issue 13).

confluent-kafka's AdminClient (``incremental_alter_configs``, ``alter_configs``,
``describe_configs``, whose librdkafka always sets ``include_synonyms``) and kafka-python's
``KafkaAdminClient``
(``alter_configs``, ``describe_configs``) against a real cluster; then the three live effects
Kafka's ``DynamicBrokerReconfigurationTest`` / ``LogCleanerIntegrationTest``-style tests check:
a lowered ``retention.ms`` deletes old segments at the next retention check, ``max.message.bytes``
(topic) and ``message.max.bytes`` (broker default) admit or refuse a batch at once, and
``min.insync.replicas`` above the ISR fails acks=all produces with NOT_ENOUGH_REPLICAS.

This module runs its own ``pykraft dev`` cluster (one controller, two brokers): the retention
check runs every second and a paused follower leaves the ISR after three, and no other test
sees its broker configs change. It starts only when these tests run and always stops.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._config import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic
from kafka.admin import ConfigResource as KafkaPythonResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.protocol.admin import IncrementalAlterConfigsRequest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from tests.clients.conftest import DevCluster
from tests.clients.support import _exchange, metadata, unique_topic

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
MODULE_ARGS = (
    "--broker-property", "log.retention.check.interval.ms=1000",
    "--broker-property", "replica.lag.time.max.ms=3000",
)  # fmt: skip
SET, APPEND, DELETE = AlterConfigOpType.SET, AlterConfigOpType.APPEND, AlterConfigOpType.DELETE


@pytest.fixture(scope="module")
def configs_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dev = DevCluster(
        tmp_path_factory.mktemp("configs") / "cluster",
        controllers=1,
        brokers=2,
        extra_args=MODULE_ARGS,
    )
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()


@pytest.fixture
def admin(configs_cluster: DevCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": configs_cluster.bootstrap_servers})


def create_topic(
    cluster: DevCluster,
    admin: AdminClient,
    configs: dict[str, str] | None = None,
    replicas: list[int] | None = None,
) -> str:
    topic = unique_topic("configs")
    new = (
        NewTopic(topic, 1, replica_assignment=[replicas], config=configs or {})
        if replicas
        else NewTopic(topic, num_partitions=1, replication_factor=1, config=configs or {})
    )
    futures = admin.create_topics([new], operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    cluster.wait_for_topic(topic, 1)
    return topic


def incremental(admin: AdminClient, resource: ConfigResource, **kw: Any) -> None:
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S, **kw)
    futures[resource].result(timeout=TIMEOUT_S)


def describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    # librdkafka asks for synonyms itself (DescribeConfigs v1+ include_synonyms=true).
    futures = admin.describe_configs([resource], request_timeout=TIMEOUT_S)
    described: dict[str, ConfigEntry] = futures[resource].result(timeout=TIMEOUT_S)
    return described


def raw_incremental(
    port: int, resource_type: int, resource_name: str, name: str, value: str | None
) -> None:
    """One IncrementalAlterConfigs v0 request on the wire to the broker on ``port``: SET, or
    (``value`` None) DELETE. For what the clients will not send, or to one chosen broker."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig(
        name=name, config_operation=SET.value if value is not None else DELETE.value, value=value
    )
    request = IncrementalAlterConfigsRequest(
        version=0,
        validate_only=False,
        resources=[
            resource(resource_type=resource_type, resource_name=resource_name, configs=[config])
        ],
    )
    body = _exchange(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, bytes(request.encode(version=0)))
    [answer] = decode_response(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, body).responses
    assert answer.error_code == 0, answer


def set_cluster_default(cluster: DevCluster, name: str, value: str | None) -> None:
    """The cluster-wide default broker resource (``BROKER, ""``), which neither client
    addresses (confluent-kafka refuses an empty name, kafka-python wants an integer)."""
    raw_incremental(cluster.broker_ports[0], 4, "", name, value)


def described_when(
    admin: AdminClient, resource: ConfigResource, ready: Callable[[dict[str, ConfigEntry]], bool]
) -> dict[str, ConfigEntry]:
    """DescribeConfigs is answered from the broker's metadata image, which applies a change a
    moment after the controller committed it (as in Kafka): ask until ``ready``."""
    deadline = time.monotonic() + TIMEOUT_S
    while not ready(configs := describe(admin, resource)):
        assert time.monotonic() < deadline, f"{resource} never ready: {configs}"
        time.sleep(0.2)
    return configs


def entry(name: str, value: str | None, op: AlterConfigOpType = SET) -> ConfigEntry:
    return ConfigEntry(name, value, incremental_operation=op)


def eventually(check: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s}s: {what}"
        time.sleep(0.2)


# ------------------------------------------------------------------ the admin APIs


def test_confluent_incremental_alter_and_describe_a_topic(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    topic = create_topic(configs_cluster, admin)
    resource = ConfigResource("topic", topic)
    resource.add_incremental_config(entry("retention.ms", "3600000"))
    resource.add_incremental_config(entry("cleanup.policy", "compact", APPEND))
    incremental(admin, resource)
    configs = described_when(
        admin, ConfigResource("topic", topic), lambda c: c["retention.ms"].value == "3600000"
    )
    assert ConfigSource(configs["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    # APPEND to a key not set starts from its default (ConfigurationControlManager.getParts).
    assert configs["cleanup.policy"].value == "delete,compact"
    assert ConfigSource(configs["segment.bytes"].source) == ConfigSource.DEFAULT_CONFIG
    assert configs["segment.bytes"].is_default

    # validate_only changes nothing; a bad value is INVALID_CONFIG with Kafka's message.
    dry = ConfigResource("topic", topic)
    dry.add_incremental_config(entry("retention.ms", "5"))
    incremental(admin, dry, validate_only=True)
    assert describe(admin, ConfigResource("topic", topic))["retention.ms"].value == "3600000"
    bad = ConfigResource("topic", topic)
    bad.add_incremental_config(entry("retention.ms", "-2"))
    with pytest.raises(KafkaException) as refused:
        incremental(admin, bad)
    error = refused.value.args[0]
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "Value must be at least -1" in error.str()


# The legacy API is what this test is about: confluent-kafka's deprecation notice is expected.
@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_confluent_alter_configs_replaces_the_whole_set(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    topic = create_topic(configs_cluster, admin, {"retention.ms": "3600000"})
    resource = ConfigResource("topic", topic, set_config={"segment.ms": "600000"})
    futures = admin.alter_configs([resource], request_timeout=TIMEOUT_S)
    futures[resource].result(timeout=TIMEOUT_S)
    configs = described_when(
        admin, ConfigResource("topic", topic), lambda c: c["segment.ms"].value == "600000"
    )
    # AlterConfigs sets the whole resource: the override left out is gone.
    assert ConfigSource(configs["retention.ms"].source) == ConfigSource.DEFAULT_CONFIG


def test_confluent_broker_configs_with_sources_and_synonyms(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    broker_id = min(configs_cluster.brokers)
    set_cluster_default(configs_cluster, "log.retention.bytes", "1073741824")
    mine = ConfigResource("broker", str(broker_id))
    mine.add_incremental_config(entry("log.retention.bytes", "2147483648"))
    incremental(admin, mine)
    try:
        configs = described_when(
            admin,
            ConfigResource("broker", str(broker_id)),
            lambda c: c["log.retention.bytes"].value == "2147483648",
        )
        retention = configs["log.retention.bytes"]
        assert ConfigSource(retention.source) == ConfigSource.DYNAMIC_BROKER_CONFIG
        assert not retention.is_read_only
        # confluent-kafka keeps one synonym per name; kafka-python lists them all, in
        # Kafka's order: this broker's, the cluster default, Kafka's default.
        client = KafkaAdminClient(bootstrap_servers=configs_cluster.bootstrap_servers)
        try:
            described = client.describe_configs(
                [KafkaPythonResource(ConfigResourceType.BROKER, str(broker_id))],
                include_synonyms=True,
                config_filter="all",
            )
        finally:
            client.close()
        synonyms = described["broker"][str(broker_id)]["log.retention.bytes"]["synonyms"]
        assert [(s["value"], s["source"]) for s in synonyms] == [
            ("2147483648", "DYNAMIC_BROKER_CONFIG"),
            ("1073741824", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            ("-1", "DEFAULT_CONFIG"),
        ]
        assert configs["node.id"].is_read_only
        other = max(configs_cluster.brokers)
        theirs = described_when(
            admin,
            ConfigResource("broker", str(other)),
            lambda c: c["log.retention.bytes"].value == "1073741824",
        )["log.retention.bytes"]
        assert (theirs.value, ConfigSource(theirs.source)) == (
            "1073741824",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        )
        # A read-only key: INVALID_REQUEST with DynamicBrokerConfig's message.
        static = ConfigResource("broker", str(broker_id))
        static.add_incremental_config(entry("num.partitions", "3"))
        with pytest.raises(KafkaException) as refused:
            incremental(admin, static)
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_REQUEST
        assert "Cannot update these configs dynamically: Set(num.partitions)" in error.str()
    finally:
        undo = ConfigResource("broker", str(broker_id))
        undo.add_incremental_config(entry("log.retention.bytes", None, DELETE))
        incremental(admin, undo)
        set_cluster_default(configs_cluster, "log.retention.bytes", None)


def test_kafka_python_alter_and_describe(configs_cluster: DevCluster, admin: AdminClient) -> None:
    topic = create_topic(configs_cluster, admin, {"retention.ms": "3600000"})
    client = KafkaAdminClient(bootstrap_servers=configs_cluster.bootstrap_servers)
    resource = KafkaPythonResource(ConfigResourceType.TOPIC, topic)
    try:
        # AlterConfigs (legacy): kafka-python first reads the modified keys back and resends
        # them, since the request replaces the resource's whole set.
        answer = client.alter_configs(
            [KafkaPythonResource(ConfigResourceType.TOPIC, topic, configs={"flush.ms": "60000"})],
            incremental=False,
        )
        assert answer == {"topic": {topic: "OK"}}

        def modified() -> dict[str, Any]:
            described = client.describe_configs([resource], include_synonyms=True)
            configs: dict[str, Any] = described["topic"][topic]
            return configs

        eventually(lambda: "flush.ms" in modified(), "flush.ms set")
        configs = modified()
        assert {name: c["value"] for name, c in configs.items()} == {
            "flush.ms": "60000",
            "retention.ms": "3600000",
        }
        assert [s["name"] for s in configs["retention.ms"]["synonyms"]] == ["retention.ms"]
        broker = client.describe_configs(
            [KafkaPythonResource(ConfigResourceType.BROKER, str(min(configs_cluster.brokers)))],
            config_filter="all",
        )
        assert "log.retention.ms" in next(iter(broker["broker"].values()))
    finally:
        client.close()


# ------------------------------------------------------------------ live effects


def test_lowering_retention_deletes_old_segments_at_the_next_check(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    topic = create_topic(configs_cluster, admin, {"segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": configs_cluster.bootstrap_servers, "linger.ms": 0})
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    for n in range(30):
        producer.produce(topic, value=b"v" * 200, timestamp=an_hour_ago + n)
        producer.flush(TIMEOUT_S)
    partition = TopicPartition(topic, 0)

    def earliest() -> int:
        futures = admin.list_offsets({partition: OffsetSpec.earliest()})  # type: ignore[no-untyped-call]
        return int(futures[partition].result(timeout=TIMEOUT_S).offset)

    # The precondition, not a proof that retention ran and kept everything (a sleep could not
    # prove that under load either): the records start at 0 before retention.ms is lowered.
    assert earliest() == 0
    resource = ConfigResource("topic", topic)
    resource.add_incremental_config(entry("retention.ms", "60000"))
    incremental(admin, resource)
    eventually(lambda: earliest() > 0, "old segments deleted after retention.ms was lowered")


def test_max_message_bytes_applies_without_a_restart(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    topic = create_topic(configs_cluster, admin, {"max.message.bytes": "2000"})
    producer = Producer(
        {"bootstrap.servers": configs_cluster.bootstrap_servers, "retries": 0, "linger.ms": 0}
    )

    def produce_to(name: str, size: int) -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer.produce(name, value=b"x" * size, on_delivery=lambda e, _: outcome.append(e))
        producer.flush(TIMEOUT_S)
        return outcome[0]

    def too_large(error: KafkaError | None) -> bool:
        return error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE

    # A change is in effect once the leader has applied the ConfigRecord (its metadata
    # log), a moment after the controller answered, as in Kafka.
    assert too_large(produce_to(topic, 5000))
    raised = ConfigResource("topic", topic)
    raised.add_incremental_config(entry("max.message.bytes", "100000"))
    incremental(admin, raised)
    eventually(lambda: produce_to(topic, 5000) is None, "max.message.bytes raised")
    lowered = ConfigResource("topic", topic)
    lowered.add_incremental_config(entry("max.message.bytes", "2000"))
    incremental(admin, lowered)
    eventually(lambda: too_large(produce_to(topic, 5000)), "max.message.bytes lowered")
    # The broker-wide default applies to a topic without its own override, also live.
    plain = create_topic(configs_cluster, admin)
    set_cluster_default(configs_cluster, "message.max.bytes", "2000")
    try:
        eventually(lambda: too_large(produce_to(plain, 5000)), "message.max.bytes applied")
    finally:
        set_cluster_default(configs_cluster, "message.max.bytes", None)
    eventually(lambda: produce_to(plain, 5000) is None, "message.max.bytes removed")


def broker_pid(cluster: DevCluster, broker_id: int) -> int:
    [node] = [b for b in cluster.info()["brokers"] if int(b["node_id"]) == broker_id]
    return int(node["pid"])


def test_min_insync_replicas_above_the_isr_fails_acks_all_and_lowering_lets_them_through(
    configs_cluster: DevCluster, admin: AdminClient
) -> None:
    leader, follower = sorted(configs_cluster.brokers)
    topic = create_topic(configs_cluster, admin, {"min.insync.replicas": "2"}, [leader, follower])
    producer = Producer(
        {
            "bootstrap.servers": configs_cluster.bootstrap_servers,
            "acks": "all",
            "retries": 0,
            "linger.ms": 0,
            "enable.idempotence": False,
        }
    )

    def produce() -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        producer.produce(topic, value=b"v", on_delivery=lambda e, _: outcome.append(e))
        producer.flush(TIMEOUT_S)
        return outcome[0]

    def not_enough(error: KafkaError | None) -> bool:
        return error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS

    assert produce() is None  # both replicas in sync
    # While the follower is paused, talk to the leader only: a request for "any broker"
    # could pick the paused one.
    leader_port = configs_cluster.brokers[leader][1]

    def set_min_isr(value: str) -> None:
        raw_incremental(leader_port, 2, topic, "min.insync.replicas", value)

    def isr() -> list[int]:
        [answer] = metadata(leader_port, [topic]).topics
        return list(answer.partitions[0].isr_nodes)

    pid = broker_pid(configs_cluster, follower)
    os.kill(pid, signal.SIGSTOP)
    try:
        eventually(lambda: isr() == [leader], "the paused follower left the ISR")
        assert not_enough(produce())
        set_min_isr("1")
        eventually(lambda: produce() is None, "min.insync.replicas lowered")
        set_min_isr("2")
        eventually(lambda: not_enough(produce()), "min.insync.replicas raised")
    finally:
        os.kill(pid, signal.SIGCONT)
