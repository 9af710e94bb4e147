"""DescribeClientQuotas and AlterClientQuotas through ``KafkaApis.dispatch`` at v0 and v1: the
alteration reaches the controller (the in-process ``QuorumController``) and the answer per
entity, the description comes from the broker's image, and both refuse a principal without
ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster with nothing forwarded (Kafka's
``KafkaApisTest.testDescribeClientQuotas*`` / ``ControllerApisTest.testAlterClientQuotas*``
and ``handleDescribeClientQuotasRequest``'s authorization)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api import client_quotas as quota_api
from pykraft.metadata.auth.acl import AclBinding, AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import apis_over, pets_and_birds, started_cluster
from tests.broker.replica_harness import Cluster, InProcessController
from tests.broker.test_authorization import ADMIN, CAROL, acl, authorizer, dispatch


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_and_birds(0))


def apis_with(
    cluster: Cluster, *bindings: AclBinding, secured: bool = False
) -> tuple[KafkaApis, InProcessController]:
    controller = InProcessController(cluster)
    holder = authorizer(*bindings) if secured or bindings else None
    return apis_over(cluster, controller, holder), controller


def alter_entry(parts: list[tuple[str, str | None]], ops: list[tuple[str, float | None]]) -> Any:
    entry = AlterClientQuotasRequest.EntryData
    return entry(
        entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in parts],
        ops=[entry.OpData(key=k, value=0.0 if v is None else v, remove=v is None) for k, v in ops],
    )


def alter(
    apis: KafkaApis,
    version: int,
    *entries: Any,
    validate_only: bool = False,
    principal: Any = CAROL,
) -> list[tuple[int, str | None, list[tuple[str, str | None]]]]:
    request = AlterClientQuotasRequest(
        version=version, entries=list(entries), validate_only=validate_only
    )
    answer = AlterClientQuotasResponse.decode(
        dispatch(apis, ApiKey.ALTER_CLIENT_QUOTAS, version, request, principal), version=version
    )
    return [
        (e.error_code, e.error_message, [(p.entity_type, p.entity_name) for p in e.entity])
        for e in answer.entries
    ]


def describe(
    apis: KafkaApis,
    version: int,
    components: list[tuple[str, int, str | None]],
    strict: bool = False,
    principal: Any = CAROL,
) -> Any:
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        version=version,
        components=[component(entity_type=t, match_type=m, match=s) for t, m, s in components],
        strict=strict,
    )
    return DescribeClientQuotasResponse.decode(
        dispatch(apis, ApiKey.DESCRIBE_CLIENT_QUOTAS, version, request, principal), version=version
    )


def described(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    return {
        tuple((p.entity_type, p.entity_name) for p in e.entity): {v.key: v.value for v in e.values}
        for e in answer.entries
    }


@pytest.mark.parametrize("version", [0, 1])
def test_alter_then_describe(cluster: Cluster, version: int) -> None:
    apis, controller = apis_with(cluster)
    answers = alter(
        apis,
        version,
        alter_entry([("client-id", "app")], [("producer_byte_rate", 500_000.0)]),
        alter_entry(
            [("user", None)], [("consumer_byte_rate", 1024.0), ("request_percentage", 25.0)]
        ),
    )
    assert answers == [(0, None, [("client-id", "app")]), (0, None, [("user", None)])]
    assert [name for name, _ in controller.calls] == ["alter_client_quotas"]
    answer = describe(apis, version, [])
    assert answer.error_code == 0
    assert described(answer) == {
        (("client-id", "app"),): {"producer_byte_rate": 500_000.0},
        (("user", None),): {"consumer_byte_rate": 1024.0, "request_percentage": 25.0},
    }
    assert described(describe(apis, version, [("user", 1, None)], strict=True)) == {
        (("user", None),): {"consumer_byte_rate": 1024.0, "request_percentage": 25.0}
    }
    assert described(describe(apis, version, [("client-id", 0, "other")])) == {}


def test_removal_and_validate_only(cluster: Cluster) -> None:
    apis, _ = apis_with(cluster)
    alter(apis, 1, alter_entry([("user", "bob")], [("producer_byte_rate", 10.0)]))
    answers = alter(
        apis, 1, alter_entry([("user", "bob")], [("producer_byte_rate", 99.0)]), validate_only=True
    )
    assert answers[0][0] == 0
    assert described(describe(apis, 1, [("user", 0, "bob")])) == {
        (("user", "bob"),): {"producer_byte_rate": 10.0}
    }
    alter(apis, 1, alter_entry([("user", "bob")], [("producer_byte_rate", None)]))
    assert described(describe(apis, 1, [("user", 0, "bob")])) == {}


def test_the_controllers_refusal_is_the_entitys_answer(cluster: Cluster) -> None:
    apis, _ = apis_with(cluster)
    answers = alter(
        apis,
        1,
        alter_entry([("user", "a")], [("producer_byte_rate", -1.0)]),
        alter_entry([("user", "b")], [("no_such_quota", 1.0)]),
        alter_entry([("user", "c")], [("producer_byte_rate", 1.0)]),
    )
    assert [a[0] for a in answers] == [
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
        Errors.NONE,
    ]
    assert answers[1][1] == "Invalid configuration key no_such_quota"


def test_a_bad_filter_is_the_responses_error(cluster: Cluster) -> None:
    apis, _ = apis_with(cluster)
    answer = describe(apis, 1, [("ip", 2, None), ("user", 2, None)])
    assert answer.error_code == Errors.INVALID_REQUEST
    assert "IP filter component" in answer.error_message
    assert answer.entries is None
    assert describe(apis, 0, [("topic", 2, None)]).error_code == Errors.UNSUPPORTED_VERSION


def test_alter_needs_alter_configs_on_the_cluster_and_forwards_nothing_without(
    cluster: Cluster,
) -> None:
    apis, controller = apis_with(
        cluster, acl(AclOperation.DESCRIBE_CONFIGS, "kafka-cluster", ResourceType.CLUSTER)
    )
    answers = alter(
        apis,
        1,
        alter_entry([("user", "a")], [("producer_byte_rate", 1.0)]),
        alter_entry([("client-id", "x")], [("producer_byte_rate", 1.0)]),
    )
    assert [a[0] for a in answers] == [Errors.CLUSTER_AUTHORIZATION_FAILED] * 2
    assert controller.calls == []
    assert describe(apis, 1, []).error_code == Errors.NONE


def test_describe_needs_describe_configs_on_the_cluster(cluster: Cluster) -> None:
    # ALTER on the cluster implies DESCRIBE, not DESCRIBE_CONFIGS (ALTER_CONFIGS would).
    apis, _ = apis_with(cluster, acl(AclOperation.ALTER, "kafka-cluster", ResourceType.CLUSTER))
    answer = describe(apis, 1, [])
    assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert answer.entries is None
    # A super user needs no ACL.
    assert describe(apis, 1, [], principal=ADMIN).error_code == Errors.NONE
    assert (
        alter(
            apis, 1, alter_entry([("user", "a")], [("producer_byte_rate", 1.0)]), principal=ADMIN
        )[0][0]
        == 0
    )


def test_alter_configs_implies_describe_configs(cluster: Cluster) -> None:
    apis, _ = apis_with(
        cluster, acl(AclOperation.ALTER_CONFIGS, "kafka-cluster", ResourceType.CLUSTER)
    )
    assert alter(apis, 1, alter_entry([("user", "a")], [("producer_byte_rate", 1.0)]))[0][0] == 0
    assert described(describe(apis, 1, [])) == {(("user", "a"),): {"producer_byte_rate": 1.0}}


def test_a_value_json_cannot_carry_is_refused_and_the_rest_forwarded(cluster: Cluster) -> None:
    apis, controller = apis_with(cluster)
    answers = alter(
        apis,
        1,
        alter_entry([("user", "nan")], [("request_percentage", float("nan"))]),
        alter_entry([("user", "ok")], [("request_percentage", 5.0)]),
    )
    assert answers[0][:2] == (
        Errors.INVALID_REQUEST,
        "Quota request_percentage must be a finite number",
    )
    assert answers[1][0] == Errors.NONE
    [(_, forwarded)] = controller.calls
    assert [a.entity for a in forwarded.entries] == [(("user", "ok"),)]  # type: ignore[attr-defined]


class ForgetfulController(InProcessController):
    """Applies AlterClientQuotas but leaves the last entity out of its answer (a controller
    bug the broker must not turn into a success)."""

    async def alter_client_quotas(
        self, request: quota_api.AlterClientQuotasRequest
    ) -> quota_api.AlterClientQuotasResponse:
        response = await super().alter_client_quotas(request)
        return attrs.evolve(response, entries=response.entries[:-1])


def test_an_entity_the_controllers_answer_leaves_out_is_an_unknown_server_error(
    cluster: Cluster,
) -> None:
    apis = apis_over(cluster, ForgetfulController(cluster))
    answers = alter(
        apis,
        1,
        alter_entry([("user", "a")], [("producer_byte_rate", 1.0)]),
        alter_entry([("user", "b")], [("producer_byte_rate", 2.0)]),
    )
    assert answers == [
        (Errors.NONE, None, [("user", "a")]),
        (
            Errors.UNKNOWN_SERVER_ERROR,
            "The controller's answer did not include this entity.",
            [("user", "b")],
        ),
    ]
