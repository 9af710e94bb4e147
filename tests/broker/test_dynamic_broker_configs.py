"""Dynamic broker configs reach every log and partition without a restart: Kafka's
``DynamicLogConfig.reconfigure`` -> ``LogManager.reconfigureDefaultLogConfig`` (every log
without its own override takes the new default) and ``min.insync.replicas`` read at each append.
Precedence, as ``DynamicBrokerConfigTest.testDynamicConfigInitializationWithoutConfigsInZK``
and ``DynamicBrokerReconfigurationTest.testDefaultTopicConfig`` exercise it: topic override >
this broker's config > the cluster default > ``server.properties`` > Kafka's default.

Real ``LogManager``s in ``tmp_path``; metadata deltas replayed from real records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.config import BrokerConfig, BrokerConfigError
from pykraft.broker.topic_configs import (
    broker_default_log_config,
    dynamic_broker_configs,
    effective_min_insync_replicas,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.errors import Errors
from pykraft.storage.log_config import LogConfig
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    OTHER,
    PETS0,
    Cluster,
    batch,
    pets_led_here,
    replay,
)
from tests.broker.test_config import BASE
from tests.broker.test_replica_manager_configs import (
    BROKER_DEFAULTS,
    Broker,
    hosted_topics,
    topic_config,
)

BROKER = ConfigResourceType.BROKER.value


def broker_config(name: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=BROKER, resource_name=name, name=key, value=value)


def test_a_cluster_default_reaches_every_log_without_an_override(tmp_path: Path) -> None:
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics())
    node.produce_old_batches(12)
    log = node.log()
    node.publish_records(broker_config("", "log.retention.ms", "60000"))
    assert log.config == LogConfig(segment_bytes=1024, retention_ms=60_000)
    assert node.log_manager.default_config.retention_ms == 60_000
    # Lowered retention: the next retention check deletes what is now too old.
    decision = log.delete_old_segments(NOW_MS)
    assert decision.deletions and len(log.segments) == 1
    # This broker's own value wins over the cluster default; another broker's does nothing.
    node.publish_records(
        broker_config(str(LOCAL), "log.retention.ms", "120000"),
        broker_config(str(OTHER), "log.retention.ms", "1"),
    )
    assert log.config.retention_ms == 120_000
    # A topic override wins over both, and the broker default comes back without it.
    node.publish_records(topic_config("pets", "retention.ms", "-1"))
    assert log.config.retention_ms == -1
    node.publish_records(topic_config("pets", "retention.ms", None))
    assert log.config.retention_ms == 120_000
    node.publish_records(
        broker_config(str(LOCAL), "log.retention.ms", None),
        broker_config("", "log.retention.ms", None),
    )
    assert log.config == BROKER_DEFAULTS
    node.close()


def test_message_max_bytes_is_applied_live_both_ways(tmp_path: Path) -> None:
    node = Broker(tmp_path)
    node.publish_records(*hosted_topics())
    big = batch(b"x" * 700)  # under BROKER_DEFAULTS' 1024-byte segments

    def append() -> Errors:
        results = node.replica_manager.append_to_local_log(
            {PETS0: bytearray(big)}, required_acks=1, now_ms=NOW_MS
        )
        return results[PETS0].error

    node.publish_records(broker_config("", "message.max.bytes", "500"))
    assert append() == Errors.MESSAGE_TOO_LARGE
    node.publish_records(broker_config("", "message.max.bytes", "100000"))
    assert append() == Errors.NONE
    # The topic's own max.message.bytes wins over the broker's message.max.bytes.
    node.publish_records(topic_config("pets", "max.message.bytes", "500"))
    assert append() == Errors.MESSAGE_TOO_LARGE
    node.close()


def test_a_new_log_is_created_with_the_dynamic_default(tmp_path: Path) -> None:
    node = Broker(tmp_path)
    node.publish_records(broker_config("", "log.segment.bytes", "4096"))
    node.publish_records(*hosted_topics())
    assert node.log().config.segment_bytes == 4096
    node.close()


def test_min_insync_replicas_precedence() -> None:
    def image(*records: ConfigRecord) -> MetadataImage:
        return replay(MetadataImage.EMPTY, records).apply()

    bare = image()
    assert effective_min_insync_replicas(bare, "pets", LOCAL, static=1) == 1
    assert effective_min_insync_replicas(bare, "pets", LOCAL, static=2) == 2
    default = image(broker_config("", "min.insync.replicas", "3"))
    assert effective_min_insync_replicas(default, "pets", LOCAL, static=2) == 3
    mine = image(
        broker_config("", "min.insync.replicas", "3"),
        broker_config(str(LOCAL), "min.insync.replicas", "4"),
        broker_config(str(OTHER), "min.insync.replicas", "5"),
    )
    assert effective_min_insync_replicas(mine, "pets", LOCAL, static=2) == 4
    topic = image(
        broker_config(str(LOCAL), "min.insync.replicas", "4"),
        topic_config("pets", "min.insync.replicas", "1"),
    )
    assert effective_min_insync_replicas(topic, "pets", LOCAL, static=2) == 1
    assert dynamic_broker_configs(mine, LOCAL) == {"min.insync.replicas": "4"}
    static = LogConfig(retention_ms=5)
    assert broker_default_log_config(bare, LOCAL, static) == static


def test_min_insync_replicas_is_read_at_every_acks_all_append(tmp_path: Path) -> None:
    # Partition.appendRecordsToLeader: |ISR| < min.insync.replicas is NOT_ENOUGH_REPLICAS,
    # with the value in force at that append.
    cluster = Cluster(tmp_path)
    try:
        cluster.start(*pets_led_here(replicas=(LOCAL, OTHER), isr=(LOCAL,)))
        assert cluster.produce(PETS0, batch(b"a"), acks=-1).error == Errors.NONE
        cluster.publish(broker_config("", "min.insync.replicas", "2"))
        assert cluster.produce(PETS0, batch(b"b"), acks=-1).error == Errors.NOT_ENOUGH_REPLICAS
        assert cluster.produce(PETS0, batch(b"c"), acks=1).error == Errors.NONE
        cluster.publish(broker_config(str(LOCAL), "min.insync.replicas", "1"))
        assert cluster.produce(PETS0, batch(b"d"), acks=-1).error == Errors.NONE
    finally:
        cluster.close()


def test_the_static_file_is_kept_for_describe_and_the_retention_check_interval_read() -> None:
    config = BrokerConfig.from_properties(
        {**BASE, "log.retention.check.interval.ms": "1000", "ssl.key.password": "s3cret"}
    )
    assert config.log_retention_check_interval_ms == 1000
    assert config.static_properties["ssl.key.password"] == "s3cret"
    assert "s3cret" not in repr(config)
    assert BrokerConfig.from_properties(BASE).log_retention_check_interval_ms == 300_000
    with pytest.raises(BrokerConfigError, match=r"log\.retention\.check\.interval\.ms"):
        BrokerConfig.from_properties({**BASE, "log.retention.check.interval.ms": "0"})


def test_the_flush_scheduler_interval_is_read_and_never_by_default() -> None:
    # Kafka's log.flush.scheduler.interval.ms: Long.MAX_VALUE, so flush.ms does nothing until an
    # operator sets it (the simulation's outage test runs the same LogManager with 500 ms).
    config = BrokerConfig.from_properties({**BASE, "log.flush.scheduler.interval.ms": "500"})
    assert config.log_flush_scheduler_interval_ms == 500
    assert BrokerConfig.from_properties(BASE).log_flush_scheduler_interval_ms == 2**63 - 1
    with pytest.raises(BrokerConfigError, match=r"log\.flush\.scheduler\.interval\.ms"):
        BrokerConfig.from_properties({**BASE, "log.flush.scheduler.interval.ms": "0"})
