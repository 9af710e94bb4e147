"""Topic/broker config validation and IncrementalAlterConfigs.

Messages follow Kafka's ``ConfigDef`` (``ConfigException``: "Invalid value X for configuration
Y: reason"; ``Range.atLeast``; ``ValidString``/``ValidList``; ``parseType``), ``LogConfig``'s
definitions and ``ConfigurationControlManagerTest.testIncrementalAlterConfigs``.
"""

from __future__ import annotations

import pytest

from pykraft.metadata.records import ConfigRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    LegacyAlterConfigsRequest,
)
from pykraft.quorum.managers.configs import (
    TOPIC_CONFIGS,
    ConfigError,
    effective_topic_configs,
    unclean_leader_election_enabled,
)
from tests.quorum.helpers import Harness, image_with

TOPIC, BROKER = 2, 4


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("min.insync.replicas", "2", None),
        (
            "min.insync.replicas",
            "0",
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            "min.insync.replicas",
            "abc",
            "Invalid value abc for configuration min.insync.replicas: Not a number of type INT",
        ),
        (
            "min.insync.replicas",
            "2147483648",
            "Invalid value 2147483648 for configuration min.insync.replicas: "
            "Not a number of type INT",
        ),
        (
            "min.insync.replicas",
            "1.5",
            "Invalid value 1.5 for configuration min.insync.replicas: Not a number of type INT",
        ),
        ("retention.ms", "-1", None),
        (
            "retention.ms",
            "-2",
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        ("retention.ms", "9223372036854775807", None),
        (
            "retention.ms",
            "9223372036854775808",
            "Invalid value 9223372036854775808 for configuration retention.ms: "
            "Not a number of type LONG",
        ),
        ("retention.bytes", "-5", None),
        ("cleanup.policy", "compact,delete", None),
        ("cleanup.policy", "compact, delete", None),
        (
            "cleanup.policy",
            "foo",
            "Invalid value foo for configuration cleanup.policy: "
            "String must be one of: compact, delete",
        ),
        ("unclean.leader.election.enable", "TRUE", None),
        (
            "unclean.leader.election.enable",
            "yes",
            "Invalid value yes for configuration unclean.leader.election.enable: "
            "Expected value to be either true or false",
        ),
        ("segment.bytes", "14", None),
        (
            "segment.bytes",
            "13",
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        ("max.message.bytes", " 1000 ", None),
        (
            "max.message.bytes",
            "-1",
            "Invalid value -1 for configuration max.message.bytes: Value must be at least 0",
        ),
        ("min.cleanable.dirty.ratio", "0.25", None),
        (
            "min.cleanable.dirty.ratio",
            "1.5",
            "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: "
            "Value must be no more than 1",
        ),
        (
            "min.cleanable.dirty.ratio",
            "x",
            "Invalid value x for configuration min.cleanable.dirty.ratio: "
            "Not a number of type DOUBLE",
        ),
        (
            "compression.type",
            "brotli",
            "Invalid value brotli for configuration compression.type: "
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("message.timestamp.type", "LogAppendTime", None),
        # Keys pykraft stores without acting on them, validated as Kafka 3.9's LogConfig does.
        ("compression.gzip.level", "-1", None),
        ("compression.gzip.level", "9", None),
        (
            "compression.gzip.level",
            "0",
            "Invalid value 0 for configuration compression.gzip.level: "
            "Value must be between 1 and 9 or equal to -1",
        ),
        ("compression.lz4.level", "17", None),
        (
            "compression.lz4.level",
            "18",
            "Invalid value 18 for configuration compression.lz4.level: "
            "Value must be no more than 17",
        ),
        ("compression.zstd.level", "-131072", None),
        (
            "compression.zstd.level",
            "23",
            "Invalid value 23 for configuration compression.zstd.level: "
            "Value must be no more than 22",
        ),
        ("local.retention.ms", "-2", None),
        (
            "local.retention.bytes",
            "-3",
            "Invalid value -3 for configuration local.retention.bytes: Value must be at least -2",
        ),
        ("message.timestamp.before.max.ms", "3600000", None),
        (
            "message.timestamp.after.max.ms",
            "-1",
            "Invalid value -1 for configuration message.timestamp.after.max.ms: "
            "Value must be at least 0",
        ),
        ("message.timestamp.difference.max.ms", "9223372036854775807", None),
        ("message.downconversion.enable", "false", None),
        ("message.format.version", "2.8-IV1", None),
        ("message.format.version", "0.10.2", None),
        (
            "message.format.version",
            "latest",
            "Invalid value latest for configuration message.format.version: "
            "Version `latest` is not a valid version",
        ),
        ("remote.storage.enable", "false", None),
        # LogConfig.validateRemoteStorageOnlyIfSystemEnabled: pykraft has no tiered storage.
        (
            "remote.storage.enable",
            "true",
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        ),
        ("remote.log.copy.disable", "true", None),
        ("remote.log.delete.on.disable", "false", None),
    ],
)
def test_topic_config_values(name: str, value: str, message: str | None) -> None:
    definition = TOPIC_CONFIGS[name]
    if message is None:
        definition.parse(value)
        return
    with pytest.raises(ConfigError) as error:
        definition.parse(value)
    assert str(error.value) == message


# Kafka 3.9's LogConfig keys (kafka-configs --describe --all on a topic).
KAFKA_3_9_TOPIC_CONFIGS = [
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
]


def test_every_topic_config_kafka_3_9_accepts_is_defined() -> None:
    assert sorted(TOPIC_CONFIGS) == sorted(KAFKA_3_9_TOPIC_CONFIGS)
    # Each takes its own default.
    for definition in TOPIC_CONFIGS.values():
        if definition.default is not None:
            definition.parse(definition.default)


def test_a_topic_stores_the_keys_pykraft_does_not_act_on() -> None:
    h = Harness(image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)]}))
    stored = {
        "message.timestamp.before.max.ms": "3600000",
        "compression.zstd.level": "9",
        "local.retention.ms": "-2",
        "message.format.version": "3.0-IV1",
        "remote.storage.enable": "false",
    }
    result = alter(h, topic("t", *(AlterableConfig(k, SET, v) for k, v in stored.items())))
    assert result.response.results[0].error.is_success()
    assert dict(h.image.configs.config(TOPIC, "t")) == stored
    assert effective_topic_configs(h.image, "t")["compression.gzip.level"] == "-1"


def alter(h: Harness, *resources: AlterConfigsResource, validate_only: bool = False):
    result = h.controller.incremental_alter_configs(
        h.image, IncrementalAlterConfigsRequest(resources, validate_only), 0
    )
    h.commit(result)
    return result


def topic(name: str, *configs: AlterableConfig) -> AlterConfigsResource:
    return AlterConfigsResource(TOPIC, name, configs)


SET, DELETE = AlterConfigOp.SET, AlterConfigOp.DELETE
APPEND, SUBTRACT = AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT


def test_set_and_delete_topic_configs() -> None:
    h = Harness(
        image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)]}, {(TOPIC, "t"): {"retention.ms": "5"}})
    )
    result = alter(
        h,
        topic(
            "t",
            AlterableConfig("min.insync.replicas", SET, "2"),
            AlterableConfig("retention.ms", DELETE),
            AlterableConfig("segment.ms", DELETE),
        ),
    )
    assert result.response.results[0].error.is_success()
    assert result.records == (
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="min.insync.replicas", value="2"),
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="retention.ms", value=None),
    )
    assert dict(h.image.configs.config(TOPIC, "t")) == {"min.insync.replicas": "2"}
    # Setting a key to the value it has writes nothing.
    again = alter(h, topic("t", AlterableConfig("min.insync.replicas", SET, "2")))
    assert again.records == ()


@pytest.mark.parametrize(
    ("resource", "error", "message"),
    [
        (
            topic("nope", AlterableConfig("retention.ms", SET, "1")),
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'nope' does not exist.",
        ),
        (
            topic("t", AlterableConfig("retention.ms", SET, "x")),
            Errors.INVALID_CONFIG,
            "Invalid value x for configuration retention.ms: Not a number of type LONG",
        ),
        (
            topic("t", AlterableConfig("foo", SET, "1")),
            Errors.INVALID_CONFIG,
            "Unknown topic config name: foo",
        ),
        (
            topic("t", AlterableConfig("retention.ms", SET, None)),
            Errors.INVALID_REQUEST,
            "Null value not supported for retention.ms with op SET.",
        ),
        (
            topic("t", AlterableConfig("retention.ms", APPEND, "1")),
            Errors.INVALID_CONFIG,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            AlterConfigsResource(
                BROKER, "abc", (AlterableConfig("min.insync.replicas", SET, "2"),)
            ),
            Errors.INVALID_REQUEST,
            "Illegal non-integral BROKER resource type name.",
        ),
        # ConfigAdminManager.validateBrokerConfigChange: a bad broker value is INVALID_REQUEST
        # (KAFKA-13609), not INVALID_CONFIG.
        (
            AlterConfigsResource(BROKER, "", (AlterableConfig("min.insync.replicas", SET, "0"),)),
            Errors.INVALID_REQUEST,
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        # Dynamic in Kafka, not applied live by pykraft: refused as a read-only key.
        (
            AlterConfigsResource(BROKER, "", (AlterableConfig("num.io.threads", SET, "2"),)),
            Errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(num.io.threads)",
        ),
        (
            AlterConfigsResource(99, "x", ()),
            Errors.INVALID_REQUEST,
            "Unsupported resource type 99.",
        ),
    ],
)
def test_alter_config_errors(resource, error, message) -> None:
    h = Harness(image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)], "u": [((1,), (1,), 1)]}))
    result = alter(h, resource, topic("u", AlterableConfig("segment.ms", SET, "1000")))
    first, second = result.response.results
    assert (first.error.error, first.error.message) == (error, message)
    # Each resource stands alone: the valid one is still written.
    assert second.error.is_success()
    assert result.records == (
        ConfigRecord(resource_type=TOPIC, resource_name="u", name="segment.ms", value="1000"),
    )


def test_append_and_subtract_list_values() -> None:
    h = Harness(image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)]}))
    # ConfigurationControlManager.getParts: an unset key starts from its default ("delete").
    alter(h, topic("t", AlterableConfig("cleanup.policy", APPEND, "compact")))
    assert h.image.configs.config(TOPIC, "t")["cleanup.policy"] == "delete,compact"
    alter(h, topic("t", AlterableConfig("cleanup.policy", SUBTRACT, "delete")))
    assert h.image.configs.config(TOPIC, "t")["cleanup.policy"] == "compact"
    alter(h, topic("t", AlterableConfig("cleanup.policy", APPEND, "delete,compact")))
    assert h.image.configs.config(TOPIC, "t")["cleanup.policy"] == "compact,delete"
    alter(h, topic("t", AlterableConfig("cleanup.policy", SUBTRACT, "compact")))
    assert h.image.configs.config(TOPIC, "t")["cleanup.policy"] == "delete"


def test_cluster_default_and_broker_configs() -> None:
    h = Harness(image_with({1: "unfenced"}))
    result = alter(
        h,
        AlterConfigsResource(
            BROKER, "", (AlterableConfig("unclean.leader.election.enable", SET, "true"),)
        ),
        AlterConfigsResource(BROKER, "1", (AlterableConfig("log.retention.ms", SET, "10"),)),
    )
    assert [r.error.error for r in result.response.results] == [Errors.NONE, Errors.NONE]
    assert unclean_leader_election_enabled(h.image, "any", cluster_default=False)


def test_validate_only_and_duplicates() -> None:
    h = Harness(image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)]}))
    change = topic("t", AlterableConfig("retention.ms", SET, "7"))
    assert alter(h, change, validate_only=True).records == ()
    result = alter(h, change, change)
    assert [r.error.error for r in result.response.results] == [Errors.NONE, Errors.INVALID_REQUEST]
    assert len(result.records) == 1


def test_unclean_precedence_topic_then_cluster_then_static() -> None:
    image = image_with(
        {1: "unfenced"},
        {"a": [((1,), (1,), 1)], "b": [((1,), (1,), 1)]},
        {
            (TOPIC, "a"): {"unclean.leader.election.enable": "false"},
            (BROKER, ""): {"unclean.leader.election.enable": "true"},
        },
    )
    assert not unclean_leader_election_enabled(image, "a", cluster_default=True)
    assert unclean_leader_election_enabled(image, "b", cluster_default=False)
    bare = image_with({1: "unfenced"})
    assert unclean_leader_election_enabled(bare, "b", cluster_default=True)
    assert not unclean_leader_election_enabled(bare, "b", cluster_default=False)


def test_effective_topic_configs() -> None:
    image = image_with(
        {1: "unfenced"}, {"t": [((1,), (1,), 1)]}, {(TOPIC, "t"): {"retention.ms": "5"}}
    )
    effective = effective_topic_configs(image, "t")
    assert effective["retention.ms"] == "5"
    assert effective["min.insync.replicas"] == "1"
    assert effective["segment.bytes"] == "1073741824"


# ------------------------------------------------------------------ dynamic broker configs


def broker_resource(name: str, *configs: AlterableConfig) -> AlterConfigsResource:
    return AlterConfigsResource(BROKER, name, configs)


@pytest.mark.parametrize(
    ("configs", "error", "message"),
    [
        # DynamicBrokerConfigTest.testConfigUpdateWithSomeInvalidConfigs: a read-only key
        # refuses the whole resource, with DynamicBrokerConfig.validateConfigs' message.
        (
            {"log.dirs": "/tmp/elsewhere"},
            Errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(log.dirs)",
        ),
        (
            {"log.retention.ms": "10", "log.retention.hours": "1"},
            Errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(log.retention.hours)",
        ),
        (
            {"num.partitions": "3", "node.id": "7"},
            Errors.INVALID_REQUEST,
            "Cannot update these configs dynamically: Set(num.partitions, node.id)",
        ),
        # DynamicBrokerConfigTest.testValidateConfigType-like: the value is checked too, and a
        # bad one is INVALID_REQUEST (ConfigAdminManager.validateBrokerConfigChange, KAFKA-13609).
        (
            {"log.segment.bytes": "13"},
            Errors.INVALID_REQUEST,
            "Invalid value 13 for configuration log.segment.bytes: Value must be at least 14",
        ),
        (
            {"log.cleanup.policy": "shred"},
            Errors.INVALID_REQUEST,
            "Invalid value shred for configuration log.cleanup.policy: "
            "String must be one of: compact, delete",
        ),
        ({"message.max.bytes": "2000000", "log.roll.ms": "60000"}, Errors.NONE, None),
        ({"log.flush.interval.ms": "5", "log.index.interval.bytes": "100"}, Errors.NONE, None),
        # DynamicConfig.Broker.validate(..., customPropsAllowed = true): a key Kafka does not
        # know (a plugin's) is stored as given.
        ({"my.plugin.setting": "anything", "log.roll.ms": "60000"}, Errors.NONE, None),
    ],
)
@pytest.mark.parametrize("name", ["", "1"])
def test_dynamic_broker_config_rules(
    name: str, configs: dict[str, str], error: Errors, message: str | None
) -> None:
    h = Harness(image_with({1: "unfenced"}))
    changes = [AlterableConfig(k, SET, v) for k, v in configs.items()]
    result = alter(h, broker_resource(name, *changes))
    [outcome] = result.response.results
    assert (outcome.error.error, outcome.error.message) == (error, message)
    written = dict(h.image.configs.config(BROKER, name))
    assert written == (configs if error is Errors.NONE else {})


def test_deleting_a_read_only_broker_key_is_harmless() -> None:
    # The resulting set is what is validated: deleting a key that is not set adds nothing.
    h = Harness(image_with({1: "unfenced"}))
    result = alter(h, broker_resource("", AlterableConfig("log.dirs", DELETE)))
    assert result.response.results[0].error.is_success()
    assert result.records == ()


# ------------------------------------------------------------------ AlterConfigs (legacy)


def legacy(h: Harness, *resources: AlterConfigsResource, validate_only: bool = False):
    result = h.controller.legacy_alter_configs(
        h.image, LegacyAlterConfigsRequest(resources, validate_only), 0
    )
    h.commit(result)
    return result


def test_legacy_alter_configs_replaces_the_whole_set() -> None:
    # ConfigurationControlManagerTest.testLegacyAlterConfigs: keys left out are deleted.
    h = Harness(
        image_with(
            {1: "unfenced"},
            {"t": [((1,), (1,), 1)]},
            {(TOPIC, "t"): {"retention.ms": "5", "segment.ms": "1000"}},
        )
    )
    result = legacy(
        h,
        topic(
            "t", AlterableConfig("segment.ms", SET, "1000"), AlterableConfig("flush.ms", SET, "9")
        ),
    )
    assert result.response.results[0].error.is_success()
    assert result.records == (
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="retention.ms", value=None),
        ConfigRecord(resource_type=TOPIC, resource_name="t", name="flush.ms", value="9"),
    )
    assert dict(h.image.configs.config(TOPIC, "t")) == {"segment.ms": "1000", "flush.ms": "9"}


def test_legacy_alter_configs_errors_validate_only_and_brokers() -> None:
    h = Harness(
        image_with({1: "unfenced"}, {"t": [((1,), (1,), 1)]}, {(TOPIC, "t"): {"retention.ms": "5"}})
    )
    bad = topic("t", AlterableConfig("retention.ms", SET, "-2"))
    missing = topic("gone", AlterableConfig("retention.ms", SET, "1"))
    static = broker_resource("2", AlterableConfig("listeners", SET, "PLAINTEXT://:1"))
    good = broker_resource("1", AlterableConfig("min.insync.replicas", SET, "2"))
    result = legacy(h, bad, missing, static, good, validate_only=True)
    assert [(r.error.error, r.error.message) for r in result.response.results] == [
        (
            Errors.INVALID_CONFIG,
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'gone' does not exist."),
        (Errors.INVALID_REQUEST, "Cannot update these configs dynamically: Set(listeners)"),
        (Errors.NONE, None),
    ]
    assert result.records == ()  # validate_only writes nothing
    written = legacy(h, good)
    assert dict(h.image.configs.config(BROKER, "1")) == {"min.insync.replicas": "2"}
    assert len(written.records) == 1


def test_effective_topic_configs_take_the_cluster_default_below_the_topic() -> None:
    image = image_with(
        {1: "unfenced"},
        {"t": [((1,), (1,), 1)]},
        {
            (TOPIC, "t"): {"retention.ms": "5"},
            (BROKER, ""): {"log.retention.ms": "7", "message.max.bytes": "2000"},
            (BROKER, "1"): {"log.segment.bytes": "4096"},  # one broker's: not the controller's
        },
    )
    effective = effective_topic_configs(image, "t")
    assert effective["retention.ms"] == "5"
    assert effective["max.message.bytes"] == "2000"
    assert effective["segment.bytes"] == "1073741824"


# KIP-73 throttles: Kafka's ThrottledReplicaListValidator and the broker rates' atLeast(0).
@pytest.mark.parametrize(
    ("resource_type", "name", "value", "error"),
    [
        (2, "leader.replication.throttled.replicas", "*", None),
        (2, "leader.replication.throttled.replicas", "0:1, 1:2", None),
        (2, "follower.replication.throttled.replicas", "", None),
        (2, "follower.replication.throttled.replicas", "0:1,x", "must be the literal '*'"),
        (2, "leader.replication.throttled.replicas", "0-1", "must be the literal '*'"),
        (2, "leader.replication.throttled.replicas", "*,0:1", "must be the literal '*'"),
        (4, "leader.replication.throttled.rate", "1048576", None),
        (4, "follower.replication.throttled.rate", "-1", "Value must be at least 0"),
        (4, "follower.replication.throttled.rate", "fast", "Not a number of type LONG"),
    ],
)
def test_replication_throttle_configs(
    resource_type: int, name: str, value: str, error: str | None
) -> None:
    from pykraft.quorum.managers.configs import validate_config_map

    result = validate_config_map(resource_type, {name: value})
    if error is None:
        assert result.is_success()
    else:
        # A broker resource's bad value is INVALID_REQUEST (validateBrokerConfigChange).
        expected = Errors.INVALID_CONFIG if resource_type == TOPIC else Errors.INVALID_REQUEST
        assert result.error is expected
        assert error in (result.message or "")
