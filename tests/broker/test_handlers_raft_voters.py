"""AddRaftVoter / RemoveRaftVoter (v0, KIP-853) on the broker: forwarded to the controller after
ControllerApis.handleAddRaftVoter / handleRemoveRaftVoter's check (ALTER on the cluster); the
controller's refusal comes back with Kafka's code and message (KafkaRaftClientReconfigTest's
error cases: DUPLICATE_VOTER, VOTER_NOT_FOUND, INCONSISTENT_CLUSTER_ID)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.handlers import ControllerError, broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api.voters import AddVoterRequest, RemoveVoterRequest, VoterListener
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.records import uuid_to_kafka_string
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.raft_voter_messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
)
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import Cluster, InProcessController, services
from tests.broker.test_authorization import acl, authorizer, dispatch

DIRECTORY = uuid.UUID("85b7f3c2-8a2e-4b8d-9e6a-4f1c2d3b4a59")


class VotersController(InProcessController):
    def __init__(self, cluster: Cluster, failure: ControllerError | None = None) -> None:
        super().__init__(cluster)
        self.failure = failure

    async def add_raft_voter(self, request: AddVoterRequest) -> None:
        self.calls.append(("add_raft_voter", request))
        if self.failure is not None:
            raise self.failure

    async def remove_raft_voter(self, request: RemoveVoterRequest) -> None:
        self.calls.append(("remove_raft_voter", request))
        if self.failure is not None:
            raise self.failure


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path))


def apis(cluster: Cluster, controller: VotersController, *bindings: Any) -> KafkaApis:
    kafka_apis = KafkaApis()
    holder = authorizer(*bindings) if bindings else None
    extra = {"authorizer": holder} if holder is not None else {}
    kafka_apis.register_all(broker_handlers(services(cluster, controller=controller, **extra)))
    return kafka_apis


def add_request(**overrides: Any) -> Any:
    fields: dict[str, Any] = {
        "version": 0,
        "cluster_id": "MkU3OEVBNTcwNTJENDM2Qk",
        "timeout_ms": 30_000,
        "voter_id": 4,
        "voter_directory_id": DIRECTORY,
        "listeners": [
            AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1", port=19096),
            AddRaftVoterRequest.Listener(name="RAFT", host="127.0.0.1", port=9096),
        ],
    }
    fields.update(overrides)
    return AddRaftVoterRequest(**fields)


def remove_request() -> Any:
    return RemoveRaftVoterRequest(
        version=0, cluster_id=None, voter_id=3, voter_directory_id=DIRECTORY
    )


def add(kafka_apis: KafkaApis, message: Any) -> Any:
    return AddRaftVoterResponse.decode(
        dispatch(kafka_apis, ApiKey.ADD_RAFT_VOTER, 0, message), version=0
    )


def remove(kafka_apis: KafkaApis, message: Any) -> Any:
    return RemoveRaftVoterResponse.decode(
        dispatch(kafka_apis, ApiKey.REMOVE_RAFT_VOTER, 0, message), version=0
    )


def test_add_voter_is_forwarded_with_its_key_and_listeners(cluster: Cluster) -> None:
    controller = VotersController(cluster)
    answer = add(apis(cluster, controller), add_request())
    assert (answer.error_code, answer.error_message) == (Errors.NONE, None)
    assert controller.calls == [
        (
            "add_raft_voter",
            AddVoterRequest(
                cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
                timeout_ms=30_000,
                voter_id=4,
                voter_directory_id=uuid_to_kafka_string(DIRECTORY.bytes),
                listeners=(
                    VoterListener(name="CONTROLLER", host="127.0.0.1", port=19096),
                    VoterListener(name="RAFT", host="127.0.0.1", port=9096),
                ),
            ),
        )
    ]


def test_remove_voter_is_forwarded(cluster: Cluster) -> None:
    controller = VotersController(cluster)
    answer = remove(apis(cluster, controller), remove_request())
    assert answer.error_code == Errors.NONE
    assert controller.calls == [
        (
            "remove_raft_voter",
            RemoveVoterRequest(
                cluster_id=None,
                voter_id=3,
                voter_directory_id=uuid_to_kafka_string(DIRECTORY.bytes),
            ),
        )
    ]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("DUPLICATE_VOTER", "The voter id for ReplicaKey(id=4) is already part of the voters"),
        ("INCONSISTENT_CLUSTER_ID", 'The given id "x" doesn\'t match the cluster id "y"'),
        ("REQUEST_TIMED_OUT", "Aborted add voter operation for 4 since it is lagging behind"),
        ("NOT_CONTROLLER", "No controller is active right now"),
    ],
)
def test_the_controllers_refusal_is_answered_with_its_code_and_message(
    cluster: Cluster, error: str, message: str
) -> None:
    controller = VotersController(cluster, ControllerError(error, message))
    answer = add(apis(cluster, controller), add_request())
    assert (answer.error_code, answer.error_message) == (Errors[error], message)
    removed = remove(apis(cluster, controller), remove_request())
    assert (removed.error_code, removed.error_message) == (Errors[error], message)


def test_voter_not_found(cluster: Cluster) -> None:
    controller = VotersController(cluster, ControllerError("VOTER_NOT_FOUND", "Cannot remove"))
    answer = remove(apis(cluster, controller), remove_request())
    assert answer.error_code == Errors.VOTER_NOT_FOUND


def test_alter_on_the_cluster_is_required(cluster: Cluster) -> None:
    controller = VotersController(cluster)
    refused = apis(
        cluster, controller, acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER)
    )
    assert add(refused, add_request()).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert remove(refused, remove_request()).error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert controller.calls == []
    allowed = apis(
        cluster, controller, acl(AclOperation.ALTER, "kafka-cluster", ResourceType.CLUSTER)
    )
    assert add(allowed, add_request()).error_code == Errors.NONE
    assert remove(allowed, remove_request()).error_code == Errors.NONE
    assert [name for name, _ in controller.calls] == ["add_raft_voter", "remove_raft_voter"]


def test_the_zero_directory_id_names_a_static_voter(cluster: Cluster) -> None:
    """kafka-python decodes Kafka's zero uuid as None; it is forwarded as the zero uuid."""
    controller = VotersController(cluster)
    message = RemoveRaftVoterRequest(
        version=0, cluster_id=None, voter_id=3, voter_directory_id=uuid.UUID(int=0)
    )
    assert remove(apis(cluster, controller), message).error_code == Errors.NONE
    [(_, forwarded)] = controller.calls
    assert isinstance(forwarded, RemoveVoterRequest)
    assert forwarded.voter_directory_id == "AAAAAAAAAAAAAAAAAAAAAA"


def test_a_timeout_beyond_the_contracts_bound_is_clamped(cluster: Cluster) -> None:
    controller = VotersController(cluster)
    answer = add(apis(cluster, controller), add_request(timeout_ms=2**31 - 1))
    assert answer.error_code == Errors.NONE
    [(_, forwarded)] = controller.calls
    assert isinstance(forwarded, AddVoterRequest)
    assert forwarded.timeout_ms == 10 * 60 * 1000
