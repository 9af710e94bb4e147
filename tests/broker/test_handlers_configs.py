"""The config handlers: DescribeConfigs from the broker's image, AlterConfigs and
IncrementalAlterConfigs preprocessed here and forwarded to an in-process controller running the
real ``QuorumController`` (so its errors and messages are the controller's). kafka-python encodes
and decodes. Cases follow ``ConfigAdminManagerTest`` (preprocess: duplicates, nulls, broker ids,
BROKER_LOGGER), ``KafkaApisTest.testIncrementalAlterConfigsWithAuthorizer`` /
``testAlterConfigsWithAuthorizer`` and ``ConfigurationControlManagerTest``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)

from pykraft.broker.config_describe import (
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
)
from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.configs import config_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api.admin import (
    IncrementalAlterConfigsRequest as PyIncrementalAlterConfigsRequest,
)
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    Cluster,
    InProcessController,
    call,
    encode,
    pets_led_here,
    services,
)
from tests.broker.test_authorization import acl, authorizer, dispatch

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
DESCRIBE_CONFIGS_VERSIONS = SUPPORTED_API_VERSIONS[ApiKey.DESCRIBE_CONFIGS]
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
STATIC = {"log.retention.hours": "1", "num.partitions": "3", "ssl.key.password": "secret"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.start(
            *pets_led_here(),
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name="pets",
                name="retention.ms",
                value="60000",
            ),
        )
        yield harness
    finally:
        harness.close()


def handle(cluster: Cluster, api_key: ApiKey, version: int, request: Any, response: Any) -> Any:
    controller = InProcessController(cluster)
    handler = config_handlers(
        services(cluster, controller=controller, static_broker_configs=STATIC)
    )[api_key]
    body = call(handler, api_key, version, encode(request, version))
    assert body is not None
    return response.decode(body, version=version)


def describe(
    cluster: Cluster,
    *resources: tuple[int, str, Any],
    version: int = 4,
    synonyms: bool = True,
    documentation: bool = False,
) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        version=version,
        include_synonyms=synonyms,
        include_documentation=documentation,
        resources=[
            resource(resource_type=t, resource_name=n, configuration_keys=k)
            for t, n, k in resources
        ],
    )
    return handle(cluster, ApiKey.DESCRIBE_CONFIGS, version, request, DescribeConfigsResponse)


def incremental(
    cluster: Cluster, *resources: tuple[int, str, list[tuple[str, int, str | None]]], **kw: Any
) -> list[tuple[str, int, str | None]]:
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        version=kw.get("version", 1),
        validate_only=kw.get("validate_only", False),
        resources=[
            resource(
                resource_type=t,
                resource_name=n,
                configs=[config(name=k, config_operation=op, value=v) for k, op, v in configs],
            )
            for t, n, configs in resources
        ],
    )
    version = request.version
    answer = handle(
        cluster, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request, IncrementalAlterConfigsResponse
    )
    return [(r.resource_name, r.error_code, r.error_message) for r in answer.responses]


def legacy(
    cluster: Cluster,
    *resources: tuple[int, str, dict[str, str | None] | list[tuple[str, str | None]]],
    version: int = 2,
) -> list[tuple[str, int, str | None]]:
    resource = AlterConfigsRequest.AlterConfigsResource
    request = AlterConfigsRequest(
        version=version,
        validate_only=False,
        resources=[
            resource(
                resource_type=t,
                resource_name=n,
                configs=[
                    resource.AlterableConfig(name=k, value=v)
                    for k, v in (configs.items() if isinstance(configs, dict) else configs)
                ],
            )
            for t, n, configs in resources
        ],
    )
    answer = handle(cluster, ApiKey.ALTER_CONFIGS, version, request, AlterConfigsResponse)
    return [(r.resource_name, r.error_code, r.error_message) for r in answer.responses]


def entries(response: Any, index: int = 0) -> dict[str, Any]:
    return {c.name: c for c in response.results[index].configs}


def topic_config(cluster: Cluster, name: str = "pets") -> dict[str, str]:
    return dict(cluster.image.configs.config(ConfigResourceType.TOPIC, name))


# ------------------------------------------------------------------ DescribeConfigs


# v0 is the "versions" part's to advertise; is_default is then the only source (checked below).
@pytest.mark.parametrize("version", [v for v in range(5) if v in DESCRIBE_CONFIGS_VERSIONS])
def test_describe_topic_configs_at_every_version(cluster: Cluster, version: int) -> None:
    response = describe(cluster, (TOPIC, "pets", None), version=version, synonyms=version >= 1)
    [result] = response.results
    assert (result.error_code, result.resource_name) == (Errors.NONE, "pets")
    configs = entries(response)
    assert (configs["retention.ms"].value, configs["retention.ms"].read_only) == ("60000", False)
    if version == 0:
        assert configs["cleanup.policy"].is_default  # v0 has no source, only this flag
    else:
        assert configs["retention.ms"].config_source == TOPIC_CONFIG
        # configSynonyms' dropWhile leaves out log.retention.hours: only the override.
        assert [(s.name, s.source) for s in configs["retention.ms"].synonyms] == [
            ("retention.ms", TOPIC_CONFIG)
        ]
        # The file's log.retention.hours=1 is every topic's default, in ms.
        assert configs["segment.ms"].value == "604800000"


def test_describe_documentation_and_types_from_v3(cluster: Cluster) -> None:
    configs = entries(describe(cluster, (TOPIC, "pets", ["retention.ms"]), documentation=True))
    assert configs["retention.ms"].config_type == 5  # LONG
    assert "segment" in configs["retention.ms"].documentation
    plain = entries(describe(cluster, (TOPIC, "pets", ["retention.ms"])))
    assert plain["retention.ms"].documentation is None


def test_describe_this_broker_and_the_cluster_default(cluster: Cluster) -> None:
    incremental(
        cluster,
        (BROKER, "", [("min.insync.replicas", SET, "2")]),
        (BROKER, str(LOCAL), [("message.max.bytes", SET, "5000")]),
    )
    response = describe(cluster, (BROKER, str(LOCAL), None), (BROKER, "", None))
    mine, default = entries(response, 0), entries(response, 1)
    assert (mine["message.max.bytes"].value, mine["message.max.bytes"].config_source) == (
        "5000",
        DYNAMIC_BROKER_CONFIG,
    )
    assert mine["min.insync.replicas"].config_source == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert (mine["num.partitions"].value, mine["num.partitions"].read_only) == ("3", True)
    assert mine["num.partitions"].config_source == STATIC_BROKER_CONFIG
    password = mine["ssl.key.password"]
    assert (password.value, password.is_sensitive) == (None, True)
    assert [s.value for s in password.synonyms] == [None]
    assert list(default) == ["min.insync.replicas"]


def test_describe_errors(cluster: Cluster) -> None:
    response = describe(
        cluster,
        (TOPIC, "pets", ["retention.ms", "no.such.config"]),
        (TOPIC, "nope", None),
        (BROKER, str(OTHER), None),
        (BROKER, "abc", None),
        (BROKER_LOGGER, "kafka.server", None),
        (99, "x", None),
    )
    outcomes = [(r.resource_name, r.error_code, r.error_message) for r in response.results]
    assert outcomes == [
        ("pets", Errors.NONE, None),
        ("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist."),
        (
            str(OTHER),
            Errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {LOCAL} or empty string, but received {OTHER}",
        ),
        ("abc", Errors.INVALID_REQUEST, "Broker id must be an integer, but it is: abc"),
        (
            "kafka.server",
            Errors.INVALID_REQUEST,
            "Broker id must be an integer, but it is: kafka.server",
        ),
        ("x", Errors.INVALID_REQUEST, "Unsupported resource type: 99"),
    ]
    assert list(entries(response)) == ["retention.ms"]
    # ConfigHelper: an empty key list asks for every config, as null does.
    everything = entries(describe(cluster, (TOPIC, "pets", [])))
    assert len(everything) == len(entries(describe(cluster, (TOPIC, "pets", None)))) > 20


# ------------------------------------------------------------------ IncrementalAlterConfigs


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_topic_configs(cluster: Cluster, version: int) -> None:
    outcome = incremental(
        cluster,
        (
            TOPIC,
            "pets",
            [("retention.ms", DELETE, None), ("cleanup.policy", APPEND, "compact")],
        ),
        version=version,
    )
    assert outcome == [("pets", Errors.NONE, None)]
    assert topic_config(cluster) == {"cleanup.policy": "delete,compact"}
    incremental(cluster, (TOPIC, "pets", [("cleanup.policy", SUBTRACT, "compact")]))
    assert topic_config(cluster) == {"cleanup.policy": "delete"}


def test_validate_only_writes_nothing(cluster: Cluster) -> None:
    outcome = incremental(
        cluster, (TOPIC, "pets", [("retention.ms", SET, "5")]), validate_only=True
    )
    assert outcome == [("pets", Errors.NONE, None)]
    assert topic_config(cluster) == {"retention.ms": "60000"}


def test_incremental_preprocess_errors(cluster: Cluster) -> None:
    outcome = incremental(
        cluster,
        (TOPIC, "pets", [("retention.ms", SET, "5")]),
        (TOPIC, "pets", [("retention.ms", SET, "6")]),
        (TOPIC, "gone", [("retention.ms", SET, "1")]),
        (TOPIC, "pets2", [("retention.ms", SET, None)]),
        (BROKER, str(OTHER), [("min.insync.replicas", SET, "2")]),
        (BROKER, "", [("log.dirs", SET, "/x"), ("min.insync.replicas", SET, "2")]),
        (BROKER, str(LOCAL), [("log.segment.bytes", SET, "1")]),
        (7, "x", []),
    )
    assert outcome == [
        ("pets", Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        ("pets", Errors.INVALID_REQUEST, "Each resource must appear at most once."),
        ("gone", Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'gone' does not exist."),
        ("pets2", Errors.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (
            str(OTHER),
            Errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {LOCAL} or empty string, but received {OTHER}",
        ),
        ("", Errors.INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)"),
        # ConfigAdminManager.validateBrokerConfigChange wraps the ConfigException (KAFKA-13609).
        (
            str(LOCAL),
            Errors.INVALID_REQUEST,
            "Invalid value 1 for configuration log.segment.bytes: Value must be at least 14",
        ),
        ("x", Errors.INVALID_REQUEST, "Unknown resource type 7"),
    ]
    assert topic_config(cluster) == {"retention.ms": "60000"}
    assert dict(cluster.image.configs.config(ConfigResourceType.BROKER, "")) == {}


def test_broker_logger_levels(cluster: Cluster) -> None:
    name = "pykraft.broker.partition"
    logger = logging.getLogger(name)
    before = logger.level
    try:
        me = str(LOCAL)
        assert incremental(cluster, (BROKER_LOGGER, me, [(name, SET, "TRACE")])) == [
            (me, Errors.NONE, None)
        ]
        assert logger.getEffectiveLevel() == 5
        response = describe(cluster, (BROKER_LOGGER, me, [name, "root"]))
        described = entries(response)
        assert described[name].value == "TRACE"
        assert described[name].config_source == DYNAMIC_BROKER_LOGGER_CONFIG
        assert incremental(cluster, (BROKER_LOGGER, me, [(name, DELETE, None)])) == [
            (me, Errors.NONE, None)
        ]
        assert logger.level == logging.NOTSET
        refused = incremental(
            cluster,
            (BROKER_LOGGER, me, [("root", DELETE, None)]),
            (BROKER_LOGGER, str(OTHER), [(name, SET, "INFO")]),
        )
        assert refused == [
            (
                me,
                Errors.INVALID_REQUEST,
                "Removing the log level of the root logger is not allowed",
            ),
            (
                str(OTHER),
                Errors.INVALID_REQUEST,
                f"Unexpected broker id, expected {LOCAL}, but received {OTHER}",
            ),
        ]
        [(_, error, message)] = incremental(cluster, (BROKER_LOGGER, me, [(name, SET, "LOUD")]))
        assert error == Errors.INVALID_CONFIG and "Valid log levels are FATAL, ERROR" in (
            message or ""
        )
        [(_, error, message)] = incremental(
            cluster, (BROKER_LOGGER, me, [("no.such", SET, "INFO")])
        )
        assert (error, message) == (Errors.INVALID_CONFIG, "Logger no.such does not exist!")
        [(_, error, _)] = incremental(cluster, (BROKER_LOGGER, me, [(name, APPEND, "INFO")]))
        assert error == Errors.INVALID_REQUEST
        incremental(cluster, (BROKER_LOGGER, me, [(name, SET, "ERROR")]), validate_only=True)
        assert logger.level == logging.NOTSET
    finally:
        logger.setLevel(before)


# ------------------------------------------------------------------ AlterConfigs


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_configs_replaces_the_whole_set(cluster: Cluster, version: int) -> None:
    outcome = legacy(cluster, (TOPIC, "pets", {"segment.ms": "1000"}), version=version)
    assert outcome == [("pets", Errors.NONE, None)]
    assert topic_config(cluster) == {"segment.ms": "1000"}  # retention.ms is gone


def test_alter_configs_preprocess_errors(cluster: Cluster) -> None:
    outcome = legacy(
        cluster,
        (BROKER, "", {"min.insync.replicas": "2"}),
        (BROKER_LOGGER, str(LOCAL), {"root": "INFO"}),
        (TOPIC, "pets", {"retention.ms": None}),
        (BROKER, str(LOCAL), {"listeners": "PLAINTEXT://:1"}),
        (BROKER, str(LOCAL) + "", {}),
    )
    # ConfigAdminManager.preprocess checks the node id only for a non-empty name: the
    # cluster default ("") is a legal resource for the legacy API too.
    assert outcome[:4] == [
        ("", Errors.NONE, None),
        (str(LOCAL), Errors.INVALID_REQUEST, "Unknown resource type 8"),
        ("pets", Errors.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (str(LOCAL), Errors.INVALID_REQUEST, "Each resource must appear at most once."),
    ]
    assert topic_config(cluster) == {"retention.ms": "60000"}
    default = cluster.image.configs.config(ConfigResourceType.BROKER, "")
    assert dict(default) == {"min.insync.replicas": "2"}


def test_a_key_named_twice_in_one_resource_is_refused(cluster: Cluster) -> None:
    """``ConfigAdminManagerTest.testPreprocessWithDuplicateConfigKeys``-like: both APIs refuse
    the resource before anything reaches the controller (else the later entry would win, or a
    DELETE undo a SET)."""
    message = "Error due to duplicate config keys"
    outcome = incremental(
        cluster,
        (TOPIC, "pets", [("retention.ms", DELETE, None), ("retention.ms", SET, "5")]),
        (BROKER, "", [("min.insync.replicas", SET, "2"), ("min.insync.replicas", SET, "3")]),
        (BROKER, str(LOCAL), [("log.roll.ms", SET, "60000")]),
    )
    assert outcome == [
        ("pets", Errors.INVALID_REQUEST, message),
        ("", Errors.INVALID_REQUEST, message),
        (str(LOCAL), Errors.NONE, None),
    ]
    assert legacy(cluster, (TOPIC, "pets", [("retention.ms", "1"), ("retention.ms", "2")])) == [
        ("pets", Errors.INVALID_REQUEST, message)
    ]
    assert topic_config(cluster) == {"retention.ms": "60000"}
    assert dict(cluster.image.configs.config(ConfigResourceType.BROKER, "")) == {}


def test_one_request_is_one_controller_call(cluster: Cluster) -> None:
    """Kafka forwards the whole request: the resources the broker does not answer itself go
    to the controller in one call (one Raft entry), each succeeding or failing on its own
    (``ConfigurationControlManager.incrementalAlterConfigs``)."""
    controller = InProcessController(cluster)
    handler = config_handlers(services(cluster, controller=controller))[
        ApiKey.INCREMENTAL_ALTER_CONFIGS
    ]
    count = 40
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        version=1,
        validate_only=False,
        resources=[
            resource(
                resource_type=TOPIC,
                resource_name="pets" if n == 0 else f"t{n}",
                configs=[config(name="retention.ms", config_operation=SET, value="9")],
            )
            for n in range(count)
        ]
        + [resource(resource_type=BROKER, resource_name="bad", configs=[])],
    )
    body = call(handler, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, encode(request, 1))
    assert body is not None
    answer = IncrementalAlterConfigsResponse.decode(body, version=1)
    codes = [r.error_code for r in answer.responses]
    # pets exists; t1.. do not; the broker resource is refused by preprocess, not forwarded.
    assert codes == [0] + [Errors.UNKNOWN_TOPIC_OR_PARTITION.code] * (count - 1) + [
        Errors.INVALID_REQUEST.code
    ]
    assert answer.responses[1].error_message == "The topic 't1' does not exist."
    assert [name for name, _ in controller.calls] == ["alter_configs_batch"]
    forwarded = controller.calls[0][1]
    assert isinstance(forwarded, PyIncrementalAlterConfigsRequest)
    assert len(forwarded.resources) == count
    assert topic_config(cluster) == {"retention.ms": "9"}


class _FailingController(InProcessController):
    async def alter_configs_batch(self, request: Any) -> Any:
        raise ControllerError("NOT_CONTROLLER", "no controller answered")


def test_a_failed_controller_call_fails_each_forwarded_resource(cluster: Cluster) -> None:
    handler = config_handlers(services(cluster, controller=_FailingController(cluster)))[
        ApiKey.INCREMENTAL_ALTER_CONFIGS
    ]
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    request = IncrementalAlterConfigsRequest(
        version=1,
        validate_only=False,
        resources=[
            resource(resource_type=TOPIC, resource_name=name, configs=[])
            for name in ("pets", "other")
        ],
    )
    body = call(handler, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, encode(request, 1))
    assert body is not None
    answer = IncrementalAlterConfigsResponse.decode(body, version=1)
    assert [(r.error_code, r.error_message) for r in answer.responses] == [
        (Errors.NOT_CONTROLLER.code, "no controller answered")
    ] * 2


# ------------------------------------------------------------------ authorization


def test_alter_configs_needs_alter_configs_and_forwards_nothing_refused(cluster: Cluster) -> None:
    """``KafkaApisTest.testIncrementalAlterConfigsWithAuthorizer``: ALTER_CONFIGS on the topic,
    else TOPIC_AUTHORIZATION_FAILED; on the cluster for a broker or logger resource, else
    CLUSTER_AUTHORIZATION_FAILED."""
    controller = InProcessController(cluster)
    apis = KafkaApis()
    holder = authorizer(acl(AclOperation.ALTER_CONFIGS))  # on the topic pets only
    apis.register_all(config_handlers(services(cluster, authorizer=holder, controller=controller)))
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    request = IncrementalAlterConfigsRequest(
        version=1,
        validate_only=False,
        resources=[
            resource(
                resource_type=t,
                resource_name=n,
                configs=[config(name=k, config_operation=SET, value=v)],
            )
            for t, n, k, v in [
                (TOPIC, "pets", "retention.ms", "7"),
                (TOPIC, "birds", "retention.ms", "7"),
                (BROKER, "", "min.insync.replicas", "2"),
                (BROKER_LOGGER, str(LOCAL), "root", "INFO"),
                # RuntimeLoggerManager authorizes first: a refused principal does not learn
                # which node ids are wrong.
                (BROKER_LOGGER, str(OTHER), "root", "INFO"),
            ]
        ],
    )
    answer = IncrementalAlterConfigsResponse.decode(
        dispatch(apis, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request), version=1
    )
    assert [r.error_code for r in answer.responses] == [
        Errors.NONE,
        Errors.TOPIC_AUTHORIZATION_FAILED,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        Errors.CLUSTER_AUTHORIZATION_FAILED,
    ]
    assert [name for name, _ in controller.calls] == ["alter_configs_batch"]
    forwarded = controller.calls[0][1]
    assert isinstance(forwarded, PyIncrementalAlterConfigsRequest)
    assert len(forwarded.resources) == 1
    assert topic_config(cluster) == {"retention.ms": "7"}
