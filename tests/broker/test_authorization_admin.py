"""The admin, SCRAM and Metadata refusals, through ``KafkaApis.dispatch`` with carol's principal:
each refused resource answers Kafka's error code and nothing reaches the controller for it (the
in-process controller records every call). They mirror ``KafkaApisTest``'s
``testDescribeConfigsWithAuthorizer`` (``ConfigHelper.handleDescribeConfigsRequest``),
``ControllerApisTest``'s ``testCreatePartitionsAuthorization``, ``AuthorizerIntegrationTest``'s
``testMetadataClusterAuthorizedOperationsWithoutDescribeCluster``, and KafkaApis'
``handleAlterUserScramCredentialsRequest`` / ``handleDescribeUserScramCredentialsRequest``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api import security
from pykraft.metadata.api.errors import SUCCESS
from pykraft.metadata.auth.acl import AclBinding, AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import apis_over, pets_and_birds, started_cluster
from tests.broker.replica_harness import Cluster, InProcessController
from tests.broker.test_authorization import ADMIN, CAROL, acl, authorizer, dispatch

TOPIC_CONFIGS = 2
BROKER_CONFIGS = 4


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_and_birds(0))


class RecordingController(InProcessController):
    """The in-process controller, answering the SCRAM calls too; ``calls`` is what reached it."""

    async def alter_user_scram_credentials(
        self, request: security.AlterUserScramCredentialsRequest
    ) -> security.AlterUserScramCredentialsResponse:
        self.calls.append(("alter_user_scram_credentials", request))
        users = dict.fromkeys(
            [*(d.name for d in request.deletions), *(u.name for u in request.upsertions)]
        )
        results = tuple(security.AlterUserScramCredentialsResult(u, SUCCESS) for u in users)
        return security.AlterUserScramCredentialsResponse(results)

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> security.DescribeUserScramCredentialsResponse:
        self.calls.append(("describe_user_scram_credentials", users))
        return security.DescribeUserScramCredentialsResponse()


def apis_with(cluster: Cluster, *bindings: AclBinding) -> tuple[KafkaApis, RecordingController]:
    controller = RecordingController(cluster)
    return apis_over(cluster, controller, authorizer(*bindings)), controller


def cluster_acl(operation: AclOperation) -> AclBinding:
    return acl(operation, "kafka-cluster", ResourceType.CLUSTER)


# ------------------------------------------------------------------ DescribeConfigs


def describe_configs(apis: KafkaApis, *resources: tuple[int, str]) -> dict[str, tuple[int, int]]:
    """resource name -> (error, number of configs)."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        version=4, include_synonyms=False, include_documentation=False,
        resources=[
            resource(resource_type=t, resource_name=n, configuration_keys=None)
            for t, n in resources
        ],
    )  # fmt: skip
    answer = DescribeConfigsResponse.decode(
        dispatch(apis, ApiKey.DESCRIBE_CONFIGS, 4, request), version=4
    )
    return {r.resource_name: (r.error_code, len(r.configs)) for r in answer.results}


def test_describe_configs_refuses_per_resource_and_asks_the_controller_nothing_for_it(
    cluster: Cluster,
) -> None:
    """``handleDescribeConfigsRequest``: DESCRIBE_CONFIGS on the topic, else
    TOPIC_AUTHORIZATION_FAILED; on the cluster for a broker, else CLUSTER_AUTHORIZATION_FAILED;
    a refused resource gets no configs."""
    apis, controller = apis_with(cluster, acl(AclOperation.DESCRIBE_CONFIGS))
    answer = describe_configs(
        apis, (TOPIC_CONFIGS, "pets"), (TOPIC_CONFIGS, "birds"), (BROKER_CONFIGS, "1")
    )
    assert answer["pets"][0] == Errors.NONE and answer["pets"][1] > 0
    assert answer["birds"] == (Errors.TOPIC_AUTHORIZATION_FAILED, 0)
    assert answer["1"] == (Errors.CLUSTER_AUTHORIZATION_FAILED, 0)
    assert controller.calls == []  # answered from the broker's own image


def test_describe_configs_refuses_before_it_checks_the_broker_id(cluster: Cluster) -> None:
    """Kafka authorizes every resource before ``ConfigHelper`` looks at it: an unauthorized
    principal learns nothing about which broker ids are valid."""
    apis, controller = apis_with(cluster)
    assert describe_configs(apis, (BROKER_CONFIGS, "99"), (TOPIC_CONFIGS, "nothing-here")) == {
        "99": (Errors.CLUSTER_AUTHORIZATION_FAILED, 0),
        "nothing-here": (Errors.TOPIC_AUTHORIZATION_FAILED, 0),
    }
    assert controller.calls == []


# ------------------------------------------------------------------ CreatePartitions


def create_partitions(apis: KafkaApis, counts: dict[str, int]) -> dict[str, int]:
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(
        version=3, timeout_ms=5000, validate_only=False,
        topics=[topic(name=name, count=count, assignments=None) for name, count in counts.items()],
    )  # fmt: skip
    answer = CreatePartitionsResponse.decode(
        dispatch(apis, ApiKey.CREATE_PARTITIONS, 3, request), version=3
    )
    return {r.name: r.error_code for r in answer.results}


def test_create_partitions_needs_alter_on_each_topic(cluster: Cluster) -> None:
    """``ControllerApis.createPartitions``: ALTER per topic, else TOPIC_AUTHORIZATION_FAILED —
    for a topic that does not exist too (existence does not leak); nothing is forwarded for a
    refused topic."""
    apis, controller = apis_with(cluster, acl(AclOperation.ALTER))
    assert create_partitions(apis, {"pets": 3, "birds": 2, "nothing-here": 2}) == {
        "pets": Errors.NONE,
        "birds": Errors.TOPIC_AUTHORIZATION_FAILED,
        "nothing-here": Errors.TOPIC_AUTHORIZATION_FAILED,
    }
    assert controller.calls == [("create_partitions", ("pets", 3, None))]
    topics = cluster.image.topics.by_name
    assert (len(topics["pets"].partitions), len(topics["birds"].partitions)) == (3, 1)


# ------------------------------------------------------------------ SCRAM credentials (KIP-554)


def alter_scram(apis: KafkaApis, principal: Any) -> dict[str, int]:
    request_type: Any = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
    request = request_type(
        version=0,
        deletions=[request_type.ScramCredentialDeletion(name="alice", mechanism=2)],
        upsertions=[
            request_type.ScramCredentialUpsertion(
                name=name, mechanism=2, iterations=4096, salt=b"salt", salted_password=b"x" * 64
            )
            for name in ("bob", "alice")
        ],
    )
    body = dispatch(apis, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request, principal)
    answer = decode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body)
    return {r.user: r.error_code for r in answer.results}


def test_alter_scram_credentials_without_cluster_alter_forwards_nothing(cluster: Cluster) -> None:
    """``ControllerApis.handleAlterUserScramCredentials`` / ``getErrorResponse``:
    CLUSTER_AUTHORIZATION_FAILED once per user named."""
    apis, controller = apis_with(cluster, cluster_acl(AclOperation.DESCRIBE))
    assert alter_scram(apis, CAROL) == {
        "alice": Errors.CLUSTER_AUTHORIZATION_FAILED,
        "bob": Errors.CLUSTER_AUTHORIZATION_FAILED,
    }
    assert controller.calls == []
    assert alter_scram(apis, ADMIN) == {"bob": Errors.NONE, "alice": Errors.NONE}
    assert [call for call, _ in controller.calls] == ["alter_user_scram_credentials"]


def test_describe_scram_credentials_without_cluster_describe_asks_nothing(
    cluster: Cluster,
) -> None:
    """``handleDescribeUserScramCredentialsRequest``: CLUSTER_AUTHORIZATION_FAILED for the
    whole answer, no users."""
    request_type: Any = request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    request = request_type(version=0, users=[request_type.UserName(name="alice")])
    apis, controller = apis_with(cluster, cluster_acl(AclOperation.ALTER_CONFIGS))
    body = dispatch(apis, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, request)
    answer = decode_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
    assert (answer.error_code, answer.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
    assert controller.calls == []


# ------------------------------------------------------------------ Metadata (KIP-430)


def cluster_operations(apis: KafkaApis, include: bool) -> Any:
    request = MetadataRequest(
        version=10, topics=[], allow_auto_topic_creation=False,
        include_cluster_authorized_operations=include, include_topic_authorized_operations=False,
    )  # fmt: skip
    body = dispatch(apis, ApiKey.METADATA, 10, request)
    return MetadataResponse.decode(body, version=10).authorized_operations


def test_metadata_reports_the_clusters_operations_only_with_describe(cluster: Cluster) -> None:
    """``handleTopicMetadataRequest`` (v8-v10): the cluster's authorized operations with
    DESCRIBE on it, 0 without, Kafka's -2147483648 when not asked."""
    apis, _ = apis_with(cluster, cluster_acl(AclOperation.ALTER))
    # ALTER implies DESCRIBE (StandardAuthorizerData).
    assert cluster_operations(apis, True) == {AclOperation.ALTER, AclOperation.DESCRIBE}
    # kafka-python reads -2147483648 (the schema default) as None.
    assert cluster_operations(apis, False) is None
    refused, _ = apis_with(cluster, cluster_acl(AclOperation.CREATE))
    assert cluster_operations(refused, True) == set()
