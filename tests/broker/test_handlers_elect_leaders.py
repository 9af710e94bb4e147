"""ElectLeaders (v0-v2) on the broker, forwarded to an in-process controller running the real
QuorumController, so the per-partition errors are the controller's. Mirrors Kafka's
ReplicationControlManagerTest.testElectPreferredLeaders / testElectUncleanLeaders (through the
wire), ControllerApisTest's ElectLeaders authorization and ElectLeadersRequestTest's error
response (v0 has no top-level error code)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from pykraft.broker.handlers import ControllerError, broker_handlers
from pykraft.broker.handlers.elect_leaders import elect_leaders_handler
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.records import TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    PETS_ID,
    Cluster,
    InProcessController,
    call,
    encode,
    partition_record,
    services,
)
from tests.broker.test_authorization import acl, authorizer, dispatch

PREFERRED, UNCLEAN = 0, 1
GONE = 3  # a broker id never registered


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(
        Cluster(tmp_path),
        TopicRecord(name="pets", topic_id=PETS_ID),
        # 0: led by LOCAL, preferred OTHER in the ISR — a PREFERRED election moves it.
        partition_record(PETS_ID, 0, (OTHER, LOCAL), leader=LOCAL),
        # 1: led by its preferred replica.
        partition_record(PETS_ID, 1, (LOCAL, OTHER)),
        # 2: the preferred replica OTHER is out of the ISR.
        partition_record(PETS_ID, 2, (OTHER, LOCAL), leader=LOCAL, isr=(LOCAL,)),
        # 3: leaderless, its only ISR member gone; LOCAL may lead only uncleanly.
        partition_record(PETS_ID, 3, (LOCAL, GONE), leader=-1, isr=(GONE,)),
        # 4: leaderless, no live replica at all.
        partition_record(PETS_ID, 4, (GONE,), leader=-1, isr=(GONE,)),
    )


def elect(
    cluster: Cluster,
    version: int,
    election_type: int,
    partitions: dict[str, list[int]] | None,
    controller: Any = None,
) -> Any:
    request = ElectLeadersRequest(
        version=version,
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [
            ElectLeadersRequest.TopicPartitions(topic=topic, partitions=ids)
            for topic, ids in partitions.items()
        ],
        timeout_ms=5000,
    )
    overrides = {} if controller is None else {"controller": controller}
    handler = elect_leaders_handler(services(cluster, **overrides))
    body = call(handler, ApiKey.ELECT_LEADERS, version, encode(request, version))
    assert body is not None
    return ElectLeadersResponse.decode(body, version=version)


def errors(response: Any) -> dict[tuple[str, int], int]:
    return {
        (result.topic, p.partition_id): p.error_code
        for result in response.replica_election_results
        for p in result.partition_result
    }


def leader(cluster: Cluster, partition: int) -> int:
    return cluster.image.topics.by_name["pets"].partitions[partition].leader


@pytest.mark.parametrize("version", [1, 2])
def test_preferred_elections_answer_per_partition(cluster: Cluster, version: int) -> None:
    response = elect(cluster, version, PREFERRED, {"pets": [0, 1, 2, 9], "ghosts": [0]})
    assert response.error_code == Errors.NONE
    assert errors(response) == {
        ("pets", 0): Errors.NONE,
        ("pets", 1): Errors.ELECTION_NOT_NEEDED,
        ("pets", 2): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
        ("pets", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("ghosts", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert leader(cluster, 0) == OTHER  # the election reached the image
    [pets] = [r for r in response.replica_election_results if r.topic == "pets"]
    messages = {p.partition_id: p.error_message for p in pets.partition_result}
    assert messages[0] is None  # Kafka's ApiError.NONE has no message
    assert messages[9] == "No such partition as pets-9"


def test_v0_is_always_preferred_and_has_no_top_level_error(cluster: Cluster) -> None:
    response = elect(cluster, 0, UNCLEAN, {"pets": [0, 3]})  # v0 cannot say UNCLEAN
    assert errors(response) == {
        ("pets", 0): Errors.NONE,
        ("pets", 3): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
    }


def test_the_v0_answer_has_no_top_level_error_code(cluster: Cluster) -> None:
    request = ElectLeadersRequest(
        version=0,
        topic_partitions=[ElectLeadersRequest.TopicPartitions(topic="pets", partitions=[1])],
        timeout_ms=5000,
    )
    handler = elect_leaders_handler(services(cluster))
    body = call(handler, ApiKey.ELECT_LEADERS, 0, encode(request, 0))
    assert body is not None
    # throttle_time_ms, then at once the results array (v1+ put an int16 error code between).
    assert struct.unpack_from(">ii", body) == (0, 1)


def test_unclean_elections(cluster: Cluster) -> None:
    response = elect(cluster, 2, UNCLEAN, {"pets": [1, 3, 4]})
    assert errors(response) == {
        ("pets", 1): Errors.ELECTION_NOT_NEEDED,  # it has a leader
        ("pets", 3): Errors.NONE,
        ("pets", 4): Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    }
    partition = cluster.image.topics.by_name["pets"].partitions[3]
    assert (partition.leader, partition.isr) == (LOCAL, (LOCAL,))


def test_every_partition_leaves_out_those_needing_no_election(cluster: Cluster) -> None:
    response = elect(cluster, 2, PREFERRED, None)
    assert errors(response) == {
        ("pets", 0): Errors.NONE,
        ("pets", 2): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
        ("pets", 3): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
        ("pets", 4): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
    }


def test_an_unknown_election_type_is_refused_before_the_controller(cluster: Cluster) -> None:
    controller = InProcessController(cluster)
    response = elect(cluster, 2, 7, {"pets": [0]}, controller)
    assert response.error_code == Errors.INVALID_REQUEST
    assert errors(response) == {("pets", 0): Errors.INVALID_REQUEST}
    assert controller.calls == []


class UnreachableController(InProcessController):
    async def elect_leaders(self, request: Any) -> Any:
        raise ControllerError("REQUEST_TIMED_OUT", "no answer")


@pytest.mark.parametrize(
    ("version", "partitions", "expected"),
    [
        (2, {"pets": [0, 1]}, {("pets", 0): Errors.REQUEST_TIMED_OUT, ("pets", 1): 7}),
        (2, None, {}),  # every partition: nothing to list
        (0, {"pets": [0]}, {("pets", 0): Errors.REQUEST_TIMED_OUT}),
    ],
)
def test_a_controller_failure_is_the_answer_to_every_partition(
    cluster: Cluster, version: int, partitions: Any, expected: dict[Any, int]
) -> None:
    response = elect(cluster, version, PREFERRED, partitions, UnreachableController(cluster))
    if version >= 1:
        assert response.error_code == Errors.REQUEST_TIMED_OUT
    assert errors(response) == expected


def test_alter_on_the_cluster_is_required(cluster: Cluster) -> None:
    """ControllerApis.handleElectLeaders: authorizeClusterOperation(ALTER); refused, nothing
    reaches the controller and every requested partition carries the error."""
    controller = InProcessController(cluster)
    apis = KafkaApis()
    apis.register_all(
        broker_handlers(
            services(
                cluster,
                controller=controller,
                authorizer=authorizer(acl(AclOperation.ALTER, "pets", ResourceType.TOPIC)),
            )
        )
    )
    request = ElectLeadersRequest(
        version=2,
        election_type=PREFERRED,
        topic_partitions=[ElectLeadersRequest.TopicPartitions(topic="pets", partitions=[0])],
        timeout_ms=5000,
    )
    response = ElectLeadersResponse.decode(
        dispatch(apis, ApiKey.ELECT_LEADERS, 2, request), version=2
    )
    assert response.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert errors(response) == {("pets", 0): Errors.CLUSTER_AUTHORIZATION_FAILED}
    assert controller.calls == []
    assert leader(cluster, 0) == LOCAL

    allowed = KafkaApis()
    allowed.register_all(
        broker_handlers(
            services(
                cluster,
                controller=controller,
                authorizer=authorizer(
                    acl(AclOperation.ALTER, "kafka-cluster", ResourceType.CLUSTER)
                ),
            )
        )
    )
    response = ElectLeadersResponse.decode(
        dispatch(allowed, ApiKey.ELECT_LEADERS, 2, request), version=2
    )
    assert errors(response) == {("pets", 0): Errors.NONE}
