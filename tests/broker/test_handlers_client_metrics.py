"""CLIENT_METRICS (resource type 16, KIP-714) through the config handlers and
ListClientMetricsResources (74 v0): altered through the
in-process controller (the real ``QuorumController``), described from the broker's image as
``ConfigHelper.describeConfigs`` does, authorized on the cluster as ``KafkaApis`` does
(``KafkaApisTest.testDescribeConfigsClientMetrics`` style)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)

from pykraft.broker.authorization import API_ACL_CHECKS
from pykraft.broker.config_describe import CLIENT_METRICS_CONFIG
from pykraft.broker.handlers import broker_handlers
from pykraft.broker.handlers.client_metrics import list_client_metrics_resources_handler
from pykraft.broker.handlers.configs import config_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from tests.broker.replica_harness import Cluster, InProcessController, services
from tests.broker.test_authorization import acl, authorizer, dispatch
from tests.broker.test_handlers_configs import (
    BROKER,
    DELETE,
    SET,
    describe,
    entries,
    incremental,
    legacy,
)

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS.value


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.start(
            ConfigRecord(
                resource_type=ConfigResourceType.CLIENT_METRICS,
                resource_name="existing",
                name="interval.ms",
                value="1000",
            )
        )
        yield harness
    finally:
        harness.close()


def stored(cluster: Cluster, name: str) -> dict[str, str]:
    return dict(cluster.image.configs.config(CLIENT_METRICS, name))


def test_a_subscription_is_altered_and_described(cluster: Cluster) -> None:
    results = incremental(
        cluster,
        (
            CLIENT_METRICS,
            "producers",
            [("metrics", SET, "org.apache.kafka.producer."), ("match", SET, "client_id=app-.*")],
        ),
    )
    assert results == [("producers", Errors.NONE, None)]
    assert stored(cluster, "producers") == {
        "metrics": "org.apache.kafka.producer.",
        "match": "client_id=app-.*",
    }
    answer = describe(cluster, (CLIENT_METRICS, "producers", None))
    described = entries(answer)
    assert {name: entry.value for name, entry in described.items()} == {
        "match": "client_id=app-.*",
        "metrics": "org.apache.kafka.producer.",
    }
    assert {entry.config_source for entry in described.values()} == {CLIENT_METRICS_CONFIG}
    assert all(entry.synonyms == [] for entry in described.values())


def test_describe_a_subscription_never_set_is_empty_and_a_blank_name_refused(
    cluster: Cluster,
) -> None:
    answer = describe(
        cluster,
        (CLIENT_METRICS, "unknown", None),
        (CLIENT_METRICS, "", None),
        (CLIENT_METRICS, "existing", ["interval.ms", "metrics"]),
    )
    unknown, blank, existing = answer.results
    assert (unknown.error_code, unknown.configs) == (Errors.NONE, [])
    assert blank.error_code == Errors.INVALID_REQUEST
    assert blank.error_message == "Client metrics subscription name must not be empty"
    assert [(c.name, c.value) for c in existing.configs] == [("interval.ms", "1000")]


def test_bad_subscriptions_get_kafkas_errors(cluster: Cluster) -> None:
    results = incremental(
        cluster,
        (CLIENT_METRICS, "slow", [("interval.ms", SET, "3600001")]),
        (CLIENT_METRICS, "odd", [("colour", SET, "red")]),
        (CLIENT_METRICS, "regex", [("match", SET, "client_id=(")]),
        (CLIENT_METRICS, "", [("metrics", SET, "*")]),
    )
    assert [(name, code) for name, code, _ in results] == [
        ("slow", Errors.INVALID_REQUEST),
        ("odd", Errors.INVALID_REQUEST),
        ("regex", Errors.INVALID_CONFIG),
        ("", Errors.INVALID_REQUEST),
    ]
    assert results[0][2] is not None and "must be between 100 and 3600000" in results[0][2]
    assert results[1][2] == "Unknown client metrics configuration: colour"
    assert stored(cluster, "slow") == {}


def test_legacy_alter_configs_replaces_a_subscription(cluster: Cluster) -> None:
    results = legacy(cluster, (CLIENT_METRICS, "existing", {"metrics": "*"}))
    assert results == [("existing", Errors.NONE, None)]
    assert stored(cluster, "existing") == {"metrics": "*"}


def test_subscriptions_are_authorized_on_the_cluster(cluster: Cluster) -> None:
    """``KafkaApis``: ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster for CLIENT_METRICS."""
    controller = InProcessController(cluster)
    apis = KafkaApis()
    holder = authorizer(acl(AclOperation.DESCRIBE_CONFIGS, "kafka-cluster", ResourceType.CLUSTER))
    apis.register_all(config_handlers(services(cluster, authorizer=holder, controller=controller)))
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    alter = IncrementalAlterConfigsRequest(
        version=1,
        validate_only=False,
        resources=[
            resource(
                resource_type=CLIENT_METRICS,
                resource_name="s",
                configs=[resource.AlterableConfig(name="metrics", config_operation=SET, value="*")],
            )
        ],
    )
    answer = IncrementalAlterConfigsResponse.decode(
        dispatch(apis, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter), version=1
    )
    assert answer.responses[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert controller.calls == []
    request = DescribeConfigsRequest(
        version=4,
        include_synonyms=False,
        include_documentation=False,
        resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=CLIENT_METRICS, resource_name="existing", configuration_keys=None
            )
        ],
    )
    described = DescribeConfigsResponse.decode(
        dispatch(apis, ApiKey.DESCRIBE_CONFIGS, 4, request), version=4
    )
    assert described.results[0].error_code == Errors.NONE
    # DESCRIBE_CONFIGS on a topic is not on the cluster (ALTER_CONFIGS would imply it).
    denied = authorizer(acl(AclOperation.DESCRIBE_CONFIGS))
    refused = KafkaApis()
    refused.register_all(config_handlers(services(cluster, authorizer=denied)))
    answer2 = DescribeConfigsResponse.decode(
        dispatch(refused, ApiKey.DESCRIBE_CONFIGS, 4, request), version=4
    )
    assert answer2.results[0].error_code == Errors.CLUSTER_AUTHORIZATION_FAILED


# ------------------------------------------------------------------ ListClientMetricsResources


def list_resources(cluster: Cluster, holder: object | None = None) -> Any:
    apis = KafkaApis()
    built = services(cluster) if holder is None else services(cluster, authorizer=holder)
    apis.register_all({ApiKey.LIST_CONFIG_RESOURCES: list_client_metrics_resources_handler(built)})
    body = dispatch(apis, ApiKey.LIST_CONFIG_RESOURCES, 0, ListConfigResourcesRequest(version=0))
    return ListConfigResourcesResponse.decode(body, version=0)


def test_list_client_metrics_resources_names_every_subscription(cluster: Cluster) -> None:
    """``KafkaApisTest.testListClientMetricsResources``: the subscriptions' names; one whose
    keys are all deleted is gone; topics' and brokers' configs are not listed."""
    incremental(
        cluster,
        (CLIENT_METRICS, "consumers", [("metrics", SET, "org.apache.kafka.consumer.")]),
        (BROKER, "", [("log.cleaner.threads", SET, "2")]),
    )
    answer = list_resources(cluster)
    assert answer.error_code == Errors.NONE
    assert [(r.resource_name, r.resource_type) for r in answer.config_resources] == [
        ("consumers", CLIENT_METRICS),
        ("existing", CLIENT_METRICS),
    ]
    incremental(cluster, (CLIENT_METRICS, "existing", [("interval.ms", DELETE, None)]))
    assert [r.resource_name for r in list_resources(cluster).config_resources] == ["consumers"]


def test_list_client_metrics_resources_needs_describe_configs_on_the_cluster(
    cluster: Cluster,
) -> None:
    """``KafkaApisTest.testListClientMetricsResourcesUnauthorized``."""
    refused = list_resources(cluster, authorizer(acl(AclOperation.DESCRIBE_CONFIGS)))
    assert (refused.error_code, refused.config_resources) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        [],
    )
    allowed = authorizer(acl(AclOperation.DESCRIBE_CONFIGS, "kafka-cluster", ResourceType.CLUSTER))
    assert [r.resource_name for r in list_resources(cluster, allowed).config_resources] == [
        "existing"
    ]


def test_list_client_metrics_resources_is_registered_and_served_at_v0(cluster: Cluster) -> None:
    served = SUPPORTED_API_VERSIONS[ApiKey.LIST_CONFIG_RESOURCES]
    assert (served.min_version, served.max_version) == (0, 0)  # Kafka 3.9's range
    assert ApiKey.LIST_CONFIG_RESOURCES in API_ACL_CHECKS
    assert ApiKey.LIST_CONFIG_RESOURCES in broker_handlers(services(cluster))
