"""CLIENT_METRICS subscriptions (KIP-714) at the controller: ``ClientMetricsConfigs.validate``
and ``ConfigurationControlManager`` storing them. Cases follow Kafka's
``ClientMetricsConfigsTest`` (testValidateClientMetricsConfigs, testValidateInvalidPushInterval,
testValidateMatchPatterns) and ``ControllerConfigurationValidatorTest``'s client-metrics cases."""

from __future__ import annotations

import pytest

from pykraft.metadata.client_metrics_configs import validate_client_metrics
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    LegacyAlterConfigsRequest,
)
from tests.quorum.helpers import Harness, image_with

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS
SET, DELETE, APPEND = AlterConfigOp.SET, AlterConfigOp.DELETE, AlterConfigOp.APPEND
INVALID_REQUEST, INVALID_CONFIG = Errors.INVALID_REQUEST, Errors.INVALID_CONFIG


@pytest.mark.parametrize(
    ("name", "configs", "expected"),
    [
        ("sub", {}, None),
        ("sub", {"metrics": "org.apache.kafka.producer.", "interval.ms": "100"}, None),
        ("sub", {"metrics": "*", "interval.ms": "3600000"}, None),
        ("sub", {"match": "client_id=.*, client_software_name=apache-kafka-java"}, None),
        (
            "sub",
            {
                "match": "client_instance_id=b69cc35a-7a54-4790-aa69-cc2bd4ee4538,"
                "client_source_port=1"
            },
            None,
        ),
        ("", {"metrics": "*"}, (INVALID_REQUEST, "Subscription name can't be empty")),
        (
            "sub",
            {"colour": "blue"},
            (INVALID_REQUEST, "Unknown client metrics configuration: colour"),
        ),
        (
            "sub",
            {"interval.ms": "99"},
            (
                INVALID_REQUEST,
                "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 "
                "(1 hour)",
            ),
        ),
        ("sub", {"interval.ms": "3600001"}, (INVALID_REQUEST, "must be between 100 and 3600000")),
        ("sub", {"interval.ms": "soon"}, (INVALID_REQUEST, "interval must be an integer")),
        (
            "sub",
            {"match": "client_colour=red"},
            (INVALID_CONFIG, "Illegal client matching pattern: client_colour=red"),
        ),
        ("sub", {"match": "client_id"}, (INVALID_CONFIG, "Illegal client matching pattern")),
        ("sub", {"match": "client_id="}, (INVALID_CONFIG, "Illegal client matching pattern")),
        ("sub", {"match": "client_id=a=b"}, (INVALID_CONFIG, "Illegal client matching pattern")),
        ("sub", {"match": "client_id=[unclosed"}, (INVALID_CONFIG, "Illegal regex pattern: ")),
    ],
)
def test_validate_client_metrics(
    name: str, configs: dict[str, str], expected: tuple[Errors, str] | None
) -> None:
    problem = validate_client_metrics(name, configs)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem[0] is expected[0]
        assert expected[1] in problem[1]


def subscription(name: str, *configs: AlterableConfig) -> AlterConfigsResource:
    return AlterConfigsResource(CLIENT_METRICS, name, configs)


def test_a_subscription_is_stored_appended_to_and_deleted() -> None:
    h = Harness(image_with({1: "unfenced"}))
    result = h.controller.incremental_alter_configs(
        h.image,
        IncrementalAlterConfigsRequest(
            (
                subscription(
                    "producers",
                    AlterableConfig("metrics", SET, "org.apache.kafka.producer."),
                    AlterableConfig("interval.ms", SET, "1000"),
                ),
            ),
            False,
        ),
        0,
    )
    assert result.response.results[0].error.is_success()
    h.commit(result)
    assert dict(h.image.configs.config(CLIENT_METRICS, "producers")) == {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": "1000",
    }
    # metrics is a LIST: APPEND adds to it (ConfigurationControlManager's getParts).
    more = h.controller.incremental_alter_configs(
        h.image,
        IncrementalAlterConfigsRequest(
            (subscription("producers", AlterableConfig("metrics", APPEND, "org.apache.kafka.")),),
            False,
        ),
        0,
    )
    assert more.records == (
        ConfigRecord(
            resource_type=CLIENT_METRICS,
            resource_name="producers",
            name="metrics",
            value="org.apache.kafka.producer.,org.apache.kafka.",
        ),
    )
    h.commit(more)
    gone = h.controller.incremental_alter_configs(
        h.image,
        IncrementalAlterConfigsRequest(
            (
                subscription(
                    "producers",
                    AlterableConfig("metrics", DELETE),
                    AlterableConfig("interval.ms", DELETE),
                ),
            ),
            False,
        ),
        0,
    )
    h.commit(gone)
    assert dict(h.image.configs.config(CLIENT_METRICS, "producers")) == {}


def test_each_subscription_succeeds_or_fails_on_its_own() -> None:
    h = Harness(image_with({1: "unfenced"}))
    result = h.controller.incremental_alter_configs(
        h.image,
        IncrementalAlterConfigsRequest(
            (
                subscription("good", AlterableConfig("interval.ms", SET, "500")),
                subscription("bad", AlterableConfig("interval.ms", SET, "50")),
                subscription("worse", AlterableConfig("match", SET, "client_id=(")),
                subscription("", AlterableConfig("metrics", SET, "*")),
            ),
            False,
        ),
        0,
    )
    errors = [r.error.error for r in result.response.results]
    assert errors == [Errors.NONE, INVALID_REQUEST, INVALID_CONFIG, INVALID_REQUEST]
    assert result.records == (
        ConfigRecord(
            resource_type=CLIENT_METRICS, resource_name="good", name="interval.ms", value="500"
        ),
    )


def test_legacy_alter_configs_replaces_a_subscription() -> None:
    h = Harness(image_with({1: "unfenced"}, configs={(16, "s"): {"metrics": "a.", "match": ""}}))
    result = h.controller.legacy_alter_configs(
        h.image,
        LegacyAlterConfigsRequest(
            (subscription("s", AlterableConfig("interval.ms", SET, "200")),), False
        ),
        0,
    )
    assert result.response.results[0].error.is_success()
    h.commit(result)
    assert dict(h.image.configs.config(CLIENT_METRICS, "s")) == {"interval.ms": "200"}
