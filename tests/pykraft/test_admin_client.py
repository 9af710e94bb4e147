"""``pykraft.admin_client.KafkaAdminClient`` over a simulated network: every request is decoded
with the broker's own decoder and answered by a small cluster model with the broker's response
classes, on a fake clock — so the lookups (Metadata, FindCoordinator), the retries Kafka's admin
handlers make (a moved leader or coordinator, a loading coordinator, an unreachable bootstrap
server), the failures they do not retry, and the ``default.api.timeout.ms`` bound are checked
without a socket. Real brokers answer the same calls in tests/clients/test_transactions_tool.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

import attrs
import pytest

from pykraft.admin_client import KafkaAdminClient
from pykraft.admin_codec import (
    AbortTransactionSpec,
    AdminVersions,
    BrokerNode,
    ProducerState,
    TransactionListing,
    admin_versions,
)
from pykraft.admin_config import AdminConfig
from pykraft.admin_errors import AdminError
from pykraft.fetcher.broker_connection import BrokerConnectionError, ConnectionSettings
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    decode_request,
    encode_response,
    response_class,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.txn_markers import write_txn_markers_request, write_txn_markers_response
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock

T = TypeVar("T")
FOO0 = TopicPartition("foo", 0)
BACKOFF_MS = 100
API_TIMEOUT_MS = 2_000
Handler = Callable[[int, Any], Any]  # (broker id, decoded request) -> response fields or error


@attrs.define
class Cluster:
    """Brokers 1-3 on ports 9001-9003; ``foo`` has one partition led by ``leader``."""

    leader: int = 1
    brokers: tuple[int, ...] = (1, 2, 3)
    down: set[int] = attrs.field(factory=set)  # ports that refuse connections
    handlers: dict[ApiKey, Handler] = attrs.field(factory=dict)
    requests: list[tuple[int, ApiKey, Any]] = attrs.field(factory=list)
    ranges: dict[int, tuple[int, int]] = attrs.field(
        factory=lambda: {
            k: (r.min_version, r.max_version) for k, r in SUPPORTED_API_VERSIONS.items()
        }
    )

    def sent(self, api_key: ApiKey) -> list[tuple[int, Any]]:
        return [(broker, request) for broker, key, request in self.requests if key is api_key]

    def metadata(self, broker: int, request: Any) -> dict[str, Any]:
        response: Any = response_class(ApiKey.METADATA)
        partition = response.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0, partition_index=0, leader_id=self.leader, leader_epoch=0,
            replica_nodes=list(self.brokers), isr_nodes=list(self.brokers), offline_replicas=[],
        )  # fmt: skip
        wanted = None if request.topics is None else [t.name for t in request.topics]
        topics = [
            response.MetadataResponseTopic(
                error_code=0 if name == "foo" else Errors.UNKNOWN_TOPIC_OR_PARTITION,
                name=name, topic_id=None, is_internal=False,
                partitions=[partition] if name == "foo" else [],
            )
            for name in (wanted if wanted is not None else ["foo"])
        ]  # fmt: skip
        return {
            "brokers": [
                response.MetadataResponseBroker(node_id=b, host="h", port=9000 + b, rack=None)
                for b in self.brokers
            ],
            "cluster_id": "c",
            "controller_id": 1,
            "topics": topics,
        }


@attrs.define
class FakeConnection:
    """``fetcher.broker_connection.BrokerConnection`` on the cluster model."""

    cluster: Cluster
    host: str
    port: int

    async def versions(self) -> AdminVersions:
        if self.port in self.cluster.down:
            raise BrokerConnectionError(f"connection to {self.port} refused")
        return admin_versions(self.cluster.ranges)

    async def exchange(
        self, api_key: ApiKey, build: Callable[[AdminVersions], tuple[int, bytes]]
    ) -> tuple[int, memoryview]:
        version, body = build(await self.versions())
        request = decode_request(api_key, version, body)
        broker = self.port - 9000
        self.cluster.requests.append((broker, api_key, request))
        if api_key is ApiKey.METADATA:
            fields = self.cluster.metadata(broker, request)
        else:
            fields = self.cluster.handlers[api_key](broker, request)
        if isinstance(fields, BrokerConnectionError):
            raise fields
        response = (
            fields
            if not isinstance(fields, dict)
            else response_class(api_key)(version=version, **fields)
        )
        return version, memoryview(encode_response(api_key, version, response))

    def decoded(self, decode: Callable[[], T]) -> T:
        return decode()

    def drop(self) -> None:
        pass

    async def close(self) -> None:
        pass


def admin_client(cluster: Cluster, clock: FakeClock, *bootstrap: int) -> KafkaAdminClient:
    def connect(node: BrokerNode, settings: ConnectionSettings) -> FakeConnection:
        return FakeConnection(cluster, node.host, node.port)

    config = AdminConfig(default_api_timeout_ms=API_TIMEOUT_MS, retry_backoff_ms=BACKOFF_MS)
    servers = [("h", 9000 + b) for b in (bootstrap or (1,))]
    return KafkaAdminClient(servers, config, clock, connect)


def run(call: Callable[[KafkaAdminClient], Coroutine[Any, Any, T]], client: KafkaAdminClient) -> T:
    async def main() -> T:
        async with client:
            return await call(client)

    return asyncio.run(main())


# ---------------------------------------------------------------------------- DescribeProducers


def producers_answer(*partitions: tuple[int, int, list[Any]]) -> dict[str, Any]:
    topic: Any = response_class(ApiKey.DESCRIBE_PRODUCERS).TopicResponse
    return {
        "throttle_time_ms": 0,
        "topics": [
            topic(
                name="foo",
                partitions=[
                    topic.PartitionResponse(
                        partition_index=index, error_code=error, error_message=None,
                        active_producers=producers,
                    )
                    for index, error, producers in partitions
                ],
            )
        ],
    }  # fmt: skip


def one_producer() -> list[Any]:
    state: Any = response_class(ApiKey.DESCRIBE_PRODUCERS).TopicResponse.PartitionResponse
    return [
        state.ProducerState(
            producer_id=7, producer_epoch=1, last_sequence=4, last_timestamp=1000,
            coordinator_epoch=3, current_txn_start_offset=50,
        )
    ]  # fmt: skip


def test_bootstrap_servers_are_tried_in_order_then_the_brokers_metadata_names() -> None:
    cluster = Cluster(down={9002})
    cluster.handlers[ApiKey.DESCRIBE_PRODUCERS] = lambda b, r: producers_answer((0, 0, []))
    client = admin_client(cluster, FakeClock(), 2, 3)
    assert run(lambda c: c.list_topics(), client) == ["foo"]
    run(lambda c: c.describe_producers([FOO0]), client)
    assert [b for b, _ in cluster.sent(ApiKey.METADATA)][:1] == [3]  # 2 refused
    assert cluster.sent(ApiKey.DESCRIBE_PRODUCERS)[0][0] == 1  # the leader, by node id


def test_describe_producers_follows_a_moved_leader() -> None:
    # DescribeProducersHandler: NOT_LEADER_OR_FOLLOWER unmaps the partition; the driver looks
    # its leader up again and asks there after the back-off
    cluster, clock = Cluster(leader=1), FakeClock()

    def answer(broker: int, request: Any) -> dict[str, Any]:
        if broker != 2:
            cluster.leader = 2
            return producers_answer((0, Errors.NOT_LEADER_OR_FOLLOWER, []))
        return producers_answer((0, 0, one_producer()))

    cluster.handlers[ApiKey.DESCRIBE_PRODUCERS] = answer
    result = run(lambda c: c.describe_producers([FOO0]), admin_client(cluster, clock))
    assert result[FOO0].active_producers == (ProducerState(7, 1, 4, 1000, 3, 50),)
    assert [b for b, _ in cluster.sent(ApiKey.DESCRIBE_PRODUCERS)] == [1, 2]
    assert clock.now_ms == BACKOFF_MS


def test_describe_producers_on_a_named_broker_does_not_retry_not_leader() -> None:
    cluster = Cluster()
    cluster.handlers[ApiKey.DESCRIBE_PRODUCERS] = lambda b, r: producers_answer(
        (0, Errors.NOT_LEADER_OR_FOLLOWER, [])
    )
    with pytest.raises(AdminError, match="on brokerId 3: NOT_LEADER_OR_FOLLOWER") as failed:
        run(lambda c: c.describe_producers([FOO0], 3), admin_client(cluster, FakeClock()))
    assert failed.value.error is Errors.NOT_LEADER_OR_FOLLOWER
    assert [b for b, _ in cluster.sent(ApiKey.DESCRIBE_PRODUCERS)] == [3]


def test_describe_producers_authorization_failure_is_final() -> None:
    cluster = Cluster()
    cluster.handlers[ApiKey.DESCRIBE_PRODUCERS] = lambda b, r: producers_answer(
        (0, Errors.TOPIC_AUTHORIZATION_FAILED, [])
    )
    with pytest.raises(AdminError, match="partition foo-0: TOPIC_AUTHORIZATION_FAILED"):
        run(lambda c: c.describe_producers([FOO0]), admin_client(cluster, FakeClock()))
    assert len(cluster.sent(ApiKey.DESCRIBE_PRODUCERS)) == 1


def test_a_partition_without_a_leader_times_out_after_the_api_timeout() -> None:
    cluster, clock = Cluster(leader=-1), FakeClock()
    with pytest.raises(AdminError, match="describeProducers timed out after 2000 ms") as failed:
        run(lambda c: c.describe_producers([FOO0]), admin_client(cluster, clock))
    assert failed.value.error is Errors.REQUEST_TIMED_OUT
    assert clock.now_ms == API_TIMEOUT_MS
    assert len(cluster.sent(ApiKey.METADATA)) == API_TIMEOUT_MS // BACKOFF_MS + 1


def test_a_broker_that_does_not_serve_the_api_fails_the_call() -> None:
    cluster = Cluster()
    del cluster.ranges[ApiKey.DESCRIBE_PRODUCERS]
    with pytest.raises(AdminError, match="does not support DESCRIBE_PRODUCERS") as failed:
        run(lambda c: c.describe_producers([FOO0]), admin_client(cluster, FakeClock()))
    assert failed.value.error is Errors.UNSUPPORTED_VERSION


# ---------------------------------------------------------------------------- transactions


def coordinators(found: dict[str, tuple[int, int]]) -> dict[str, Any]:
    entry: Any = response_class(ApiKey.FIND_COORDINATOR).Coordinator
    return {
        "throttle_time_ms": 0,
        "coordinators": [
            entry(key=key, node_id=node, host="h", port=9000 + node, error_code=error,
                  error_message=None)
            for key, (node, error) in found.items()
        ],
    }  # fmt: skip


def described(broker: int, request: Any, errors: Mapping[str, int]) -> dict[str, Any]:
    state: Any = response_class(ApiKey.DESCRIBE_TRANSACTIONS).TransactionState
    return {
        "throttle_time_ms": 0,
        "transaction_states": [
            state(
                error_code=errors.get(tid, 0), transactional_id=tid,
                transaction_state="Ongoing", transaction_timeout_ms=60000,
                transaction_start_time_ms=5, producer_id=broker, producer_epoch=0,
                topics=[state.TopicData(topic="foo", partitions=[0])],
            )
            for tid in request.transactional_ids
        ],
    }  # fmt: skip


def test_describe_transactions_finds_each_coordinator_and_retries_the_retriable() -> None:
    cluster, clock = Cluster(), FakeClock()
    lookups: list[list[str]] = []

    def find(broker: int, request: Any) -> dict[str, Any]:
        lookups.append(sorted(request.coordinator_keys))
        loading = len(lookups) == 1  # "b"'s coordinator is not available at first
        return coordinators(
            {
                key: (3, Errors.COORDINATOR_NOT_AVAILABLE if loading and key == "b" else 0)
                if key != "a"
                else (2, 0)
                for key in request.coordinator_keys
            }
        )

    moved: list[int] = []

    def describe(broker: int, request: Any) -> dict[str, Any]:
        errors = {"gone": Errors.TRANSACTIONAL_ID_NOT_FOUND}
        if "c" in request.transactional_ids and not moved:
            moved.append(broker)
            errors["c"] = Errors.NOT_COORDINATOR
        return described(broker, request, errors)

    cluster.handlers[ApiKey.FIND_COORDINATOR] = find
    cluster.handlers[ApiKey.DESCRIBE_TRANSACTIONS] = describe
    result = run(
        lambda c: c.describe_transactions(["a", "b", "c", "gone"]), admin_client(cluster, clock)
    )
    assert result["gone"] is None  # TRANSACTIONAL_ID_NOT_FOUND
    found = {tid: d.coordinator_id for tid, d in result.items() if d is not None}
    assert found == {"a": 2, "b": 3, "c": 3}
    assert lookups == [["a", "b", "c", "gone"], ["b", "c"]]  # one batched lookup per round


def test_describe_transactions_authorization_failure_is_final() -> None:
    cluster = Cluster()
    cluster.handlers[ApiKey.FIND_COORDINATOR] = lambda b, r: coordinators(
        {"a": (-1, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}
    )
    with pytest.raises(AdminError, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        run(lambda c: c.describe_transactions(["a"]), admin_client(cluster, FakeClock()))


def test_before_find_coordinator_v4_each_id_is_looked_up_alone() -> None:
    cluster = Cluster()
    cluster.ranges[ApiKey.FIND_COORDINATOR] = (0, 3)

    def find(broker: int, request: Any) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "node_id": 2, "host": "h", "port": 9002,
        }  # fmt: skip

    cluster.handlers[ApiKey.FIND_COORDINATOR] = find
    cluster.handlers[ApiKey.DESCRIBE_TRANSACTIONS] = lambda b, r: described(b, r, {})
    result = run(lambda c: c.describe_transactions(["x", "y"]), admin_client(cluster, FakeClock()))
    assert sorted(result) == ["x", "y"]
    assert [r.key for _, r in cluster.sent(ApiKey.FIND_COORDINATOR)] == ["x", "y"]
    [(broker, request)] = cluster.sent(ApiKey.DESCRIBE_TRANSACTIONS)
    assert (broker, sorted(request.transactional_ids)) == (2, ["x", "y"])


def test_list_transactions_asks_every_broker_and_waits_for_a_loading_coordinator() -> None:
    cluster, clock = Cluster(), FakeClock()
    state: Any = response_class(ApiKey.LIST_TRANSACTIONS).TransactionState
    answered_by_3: list[int] = []

    def listing(broker: int, request: Any) -> dict[str, Any]:
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS if broker == 3 and not answered_by_3 else 0
        if broker == 3:
            answered_by_3.append(error)
        return {
            "throttle_time_ms": 0, "error_code": error, "unknown_state_filters": [],
            "transaction_states": [
                state(transactional_id=f"t{broker}", producer_id=broker,
                      transaction_state="Ongoing")
            ] if broker != 1 else [],
        }  # fmt: skip

    cluster.handlers[ApiKey.LIST_TRANSACTIONS] = listing
    result = run(lambda c: c.list_transactions([2, 3]), admin_client(cluster, clock))
    assert result == {
        1: (),
        2: (TransactionListing("t2", 2, "Ongoing"),),
        3: (TransactionListing("t3", 3, "Ongoing"),),
    }
    asked = [(b, r.producer_id_filters) for b, r in cluster.sent(ApiKey.LIST_TRANSACTIONS)]
    assert asked == [(1, [2, 3]), (2, [2, 3]), (3, [2, 3]), (3, [2, 3])]  # 3 asked again


def test_a_list_transactions_error_is_final() -> None:
    cluster = Cluster()
    cluster.handlers[ApiKey.LIST_TRANSACTIONS] = lambda b, r: {
        "throttle_time_ms": 0, "error_code": Errors.COORDINATOR_NOT_AVAILABLE,
        "unknown_state_filters": [], "transaction_states": [],
    }  # fmt: skip
    with pytest.raises(AdminError, match="broker 1 failed: COORDINATOR_NOT_AVAILABLE"):
        run(lambda c: c.list_transactions(), admin_client(cluster, FakeClock()))


# ---------------------------------------------------------------------------- abort


SPEC = AbortTransactionSpec(FOO0, producer_id=7, producer_epoch=1, coordinator_epoch=3)


def marker_answer(error: Errors) -> Callable[[int, Any], Any]:
    def answer(broker: int, request: Any) -> Any:
        [marker] = write_txn_markers_request(request)
        return write_txn_markers_response(1, {(marker.producer_id, FOO0): error})

    return answer


def test_abort_writes_an_abort_marker_at_the_leader_and_follows_it_when_it_moves() -> None:
    cluster = Cluster(leader=1)
    answers = [Errors.NOT_LEADER_OR_FOLLOWER, Errors.NONE]

    def answer(broker: int, request: Any) -> Any:
        cluster.leader = 3
        return marker_answer(answers.pop(0))(broker, request)

    cluster.handlers[ApiKey.WRITE_TXN_MARKERS] = answer
    run(lambda c: c.abort_transaction(SPEC), admin_client(cluster, FakeClock()))
    sent = cluster.sent(ApiKey.WRITE_TXN_MARKERS)
    assert [b for b, _ in sent] == [1, 3]
    assert {write_txn_markers_request(r)[0] for _, r in sent} == {SPEC.marker()}
    assert SPEC.marker().commit is False


@pytest.mark.parametrize(
    ("error", "sentence"),
    [
        (Errors.CLUSTER_AUTHORIZATION_FAILED, "failed due to cluster authorization error"),
        (Errors.INVALID_PRODUCER_EPOCH, "failed due an invalid producer epoch"),
        (Errors.TRANSACTION_COORDINATOR_FENCED, "coordinator epoch 3 has been fenced"),
        (Errors.CORRUPT_MESSAGE, "failed due to unexpected error: CORRUPT_MESSAGE"),
    ],
)
def test_abort_failures_are_final_with_kafkas_sentences(error: Errors, sentence: str) -> None:
    cluster = Cluster()
    cluster.handlers[ApiKey.WRITE_TXN_MARKERS] = marker_answer(error)
    with pytest.raises(AdminError, match=sentence) as failed:
        run(lambda c: c.abort_transaction(SPEC), admin_client(cluster, FakeClock()))
    assert failed.value.error is error
    assert len(cluster.sent(ApiKey.WRITE_TXN_MARKERS)) == 1


def test_a_failed_request_is_retried_like_a_disconnect() -> None:
    cluster, clock = Cluster(), FakeClock()
    outcomes: list[Any] = [BrokerConnectionError("timed out"), None]

    def answer(broker: int, request: Any) -> Any:
        outcome = outcomes.pop(0)
        return outcome if outcome is not None else marker_answer(Errors.NONE)(broker, request)

    cluster.handlers[ApiKey.WRITE_TXN_MARKERS] = answer
    run(lambda c: c.abort_transaction(SPEC), admin_client(cluster, clock))
    assert len(cluster.sent(ApiKey.WRITE_TXN_MARKERS)) == 2
    assert clock.now_ms == BACKOFF_MS


def test_describe_topics_an_unknown_topic_is_final() -> None:
    cluster = Cluster()
    with pytest.raises(AdminError, match="topic nope: UNKNOWN_TOPIC_OR_PARTITION"):
        run(lambda c: c.describe_topics(["nope"]), admin_client(cluster, FakeClock()))


# ---------------------------------------------------------------------------- the connection


@pytest.mark.parametrize(
    "failure",
    [
        "admin client to node -1 at h:9001: SASL failed: SaslAuthenticate: "
        "SASL_AUTHENTICATION_FAILED: invalid credentials",
        "admin client to node -1 at h:9001: connect failed: [SSL: CERTIFICATE_VERIFY_FAILED] "
        "certificate verify failed",
    ],
)
def test_a_refused_login_or_certificate_fails_at_once(failure: str) -> None:
    # Kafka's AuthenticationException is not retriable: a wrong password will not fix itself
    cluster, clock = Cluster(), FakeClock()
    cluster.handlers[ApiKey.LIST_TRANSACTIONS] = lambda b, r: BrokerConnectionError(failure)
    with pytest.raises(AdminError) as failed:
        run(lambda c: c.list_transactions(), admin_client(cluster, clock))
    assert str(failed.value) == failure
    assert (len(cluster.sent(ApiKey.LIST_TRANSACTIONS)), clock.now_ms) == (1, 0)


def test_a_timeout_names_why_the_connection_failed_not_its_back_off() -> None:
    cluster, clock = Cluster(), FakeClock()
    failures = iter(
        [BrokerConnectionError("node 1: ApiVersions failed: 0 bytes read")]
        + [BrokerConnectionError("node 1: reconnecting in 400 ms after 2 failure(s)")] * 100
    )
    cluster.handlers[ApiKey.LIST_TRANSACTIONS] = lambda b, r: next(failures)
    with pytest.raises(AdminError, match="last: node 1: ApiVersions failed: 0 bytes read"):
        run(lambda c: c.list_transactions(), admin_client(cluster, clock))
