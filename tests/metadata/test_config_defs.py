"""Kafka's config definitions shared by the controller and the brokers, and the configs route's
JSON for the ops the Kafka APIs need (APPEND/SUBTRACT, AlterConfigs' replace)."""

from __future__ import annotations

import pytest

from pykraft.metadata.api import admin, routes
from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.metadata.broker_config_defs import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    KAFKA_DYNAMIC_NOT_APPLIED,
    broker_config_synonyms,
    broker_value_in,
    non_dynamic_configs,
    scala_set,
)
from pykraft.metadata.config_def import ConfigType
from pykraft.metadata.config_defs import TOPIC_CONFIG_SYNONYMS, TOPIC_CONFIGS
from pykraft.metadata.records import ConfigResourceType


def test_config_type_wire_ids_are_kafkas() -> None:
    # DescribeConfigsResponse.ConfigType ids.
    assert [(t.value, t.wire_id) for t in ConfigType] == [
        ("BOOLEAN", 1),
        ("STRING", 2),
        ("INT", 3),
        ("SHORT", 4),
        ("LONG", 5),
        ("DOUBLE", 6),
        ("LIST", 7),
        ("CLASS", 8),
        ("PASSWORD", 9),
    ]


def test_every_topic_config_has_a_broker_synonym_and_documentation() -> None:
    # KIP-73's throttled-replica lists and the tiered-storage switches have no broker default
    # (ServerTopicConfigSynonyms).
    no_broker_default = {
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "remote.storage.enable",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
    }
    assert set(TOPIC_CONFIG_SYNONYMS) == set(TOPIC_CONFIGS) - no_broker_default
    assert all(definition.documentation for definition in TOPIC_CONFIGS.values())
    assert all(definition.documentation for definition in BROKER_CONFIGS.values())


def test_the_dynamic_set_is_the_most_specific_unit_of_each_log_default() -> None:
    # DynamicLogConfig.ReconfigurableConfigs holds log.retention.ms, not .hours/.minutes.
    assert "log.retention.ms" in DYNAMIC_BROKER_CONFIGS
    assert "log.roll.ms" in DYNAMIC_BROKER_CONFIGS
    assert not {"log.retention.hours", "log.retention.minutes", "log.roll.hours"} & (
        DYNAMIC_BROKER_CONFIGS
    )
    assert {"min.insync.replicas", "unclean.leader.election.enable", "message.max.bytes"} <= (
        DYNAMIC_BROKER_CONFIGS
    )
    assert not {"node.id", "log.dirs", "listeners"} & DYNAMIC_BROKER_CONFIGS
    # A dynamic broker default validates as its topic key does, under the broker's name.
    assert BROKER_CONFIGS["log.segment.bytes"].at_least == TOPIC_CONFIGS["segment.bytes"].at_least
    assert BROKER_CONFIGS["ssl.key.password"].sensitive
    assert not BROKER_CONFIGS["log.retention.ms"].sensitive


@pytest.mark.parametrize(
    ("name", "synonyms"),
    [
        ("log.retention.ms", ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
        (
            "log.retention.hours",
            ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
        ),
        ("log.roll.ms", ("log.roll.ms", "log.roll.hours")),
        ("message.max.bytes", ("message.max.bytes",)),
    ],
)
def test_broker_config_synonyms(name: str, synonyms: tuple[str, ...]) -> None:
    assert broker_config_synonyms(name) == synonyms


@pytest.mark.parametrize(
    ("properties", "value"),
    [
        ({}, None),
        ({"log.retention.hours": "1"}, "3600000"),
        ({"log.retention.minutes": "2", "log.retention.hours": "1"}, "120000"),
        ({"log.retention.ms": "5", "log.retention.hours": "1"}, "5"),
        ({"log.retention.hours": "-1"}, "-1"),  # unlimited stays -1 in every unit
    ],
)
def test_broker_value_in_takes_the_most_specific_unit(
    properties: dict[str, str], value: str | None
) -> None:
    assert broker_value_in(properties, "log.retention.ms") == value


def test_scala_set_prints_as_kafka_3_9_does() -> None:
    assert scala_set(["log.dirs", "node.id"]) == "Set(log.dirs, node.id)"


def round_trip(request: admin.AlterConfigsRequest) -> admin.AlterConfigsRequest:
    (resource,) = request.resources
    body = admin.alter_configs_request_to_json(request)
    return admin.alter_configs_request_from_json(
        ConfigResourceType(resource.resource_type), resource.resource_name, Fields(body)
    )


def test_append_subtract_and_replace_travel_over_http() -> None:
    op = admin.AlterConfigOp
    incremental = admin.IncrementalAlterConfigsRequest(
        (
            admin.AlterConfigsResource(
                ConfigResourceType.TOPIC,
                "t",
                (
                    admin.AlterableConfig("retention.ms", op.SET, "5"),
                    admin.AlterableConfig("cleanup.policy", op.APPEND, "compact"),
                    admin.AlterableConfig("x", op.SUBTRACT, "y"),
                    admin.AlterableConfig("segment.ms", op.DELETE),
                ),
            ),
        ),
        validate_only=True,
    )
    assert round_trip(incremental) == incremental
    replace = admin.LegacyAlterConfigsRequest(
        (
            admin.AlterConfigsResource(
                ConfigResourceType.BROKER, "1", (admin.AlterableConfig("a", op.SET, "1"),)
            ),
        )
    )
    assert round_trip(replace) == replace


def test_a_replace_with_other_ops_is_refused() -> None:
    body = {"set": {"a": "1"}, "delete": ["b"], "replace": True}
    with pytest.raises(JsonBodyError, match="'set' only"):
        admin.alter_configs_request_from_json(ConfigResourceType.TOPIC, "t", Fields(body))


def test_the_cluster_default_broker_resource_has_a_path_name() -> None:
    # An empty {resource_name} would leave the path without a segment (no route matches it).
    broker, topic = ConfigResourceType.BROKER, ConfigResourceType.TOPIC
    assert admin.config_name_to_path(broker.value, "") == "<default>"
    assert admin.config_name_from_path(broker, "<default>") == ""
    assert admin.config_name_to_path(broker.value, "3") == "3"
    assert admin.config_name_from_path(broker, "3") == "3"
    # A topic may not be named <default> (Kafka's legal characters), but it maps to itself.
    assert admin.config_name_from_path(topic, "<default>") == "<default>"
    assert admin.config_name_to_path(topic.value, "pets") == "pets"
    route = routes.ALTER_CONFIGS
    path = route.path(resource_type="broker", resource_name=admin.config_name_to_path(4, ""))
    assert path == "/v1/configs/broker/%3Cdefault%3E"


def test_non_dynamic_configs_names_read_only_and_unapplied_keys_in_order() -> None:
    assert not KAFKA_DYNAMIC_NOT_APPLIED & DYNAMIC_BROKER_CONFIGS
    names = ["log.retention.ms", "num.io.threads", "custom.key", "log.dirs", "message.max.bytes"]
    assert non_dynamic_configs(names) == ["num.io.threads", "log.dirs"]
