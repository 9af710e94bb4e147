"""Delegation tokens (KIP-48) end to end through real processes: 1 controller, 2 brokers with
``authorizer.class.name`` set and ``delegation.token.secret.key`` on every node
(``tests.secure_broker``), logins by ``tests.scram_client`` (SCRAM with ``tokenauth=true``).

Mirrors Kafka's ``DelegationTokenEndToEndAuthorizationTest`` (clients log in with a token and
act as its owner under the owner's ACLs), ``KafkaApis.allowTokenRequests`` (a token's login may
not use the token APIs: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, as
``DelegationTokenRequestsOnPlainTextTest`` for an unauthenticated one), ``ScramSaslServer``'s
refusal of a wrong proof, and ``SaslSslAdminIntegrationTest.testExpireDelegationToken``
(period -1 expires at once and answers the controller's time, KAFKA-17315). Every node derives
the token's credential from the metadata image and the secret, so the second broker accepts it,
and a restarted controller still finds the token by its HMAC: the HMAC is not in the log, it is
derived again.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka.admin as confluent_admin
import pytest
from confluent_kafka.admin import AdminClient
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition, FetchRequest, FetchTopic
from pykraft.protocol.fetch_client import decode_fetch_response, encode_fetch_request
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records
from tests.integration.conftest import brokers, cluster_factory  # noqa: F401 (fixtures)
from tests.integration.test_broker_process import BrokerProcess, wait_for
from tests.scram_client import KafkaConnection, SaslLoginFailed, scram_login
from tests.secure_broker import SecureBroker, start_secure_brokers
from tests.tls_material import PLAIN_USERS, SCRAM_USERS

# confluent-kafka's ACL and SCRAM types: its package does not re-export them (mypy strict).
AclBinding: Any = confluent_admin.AclBinding  # type: ignore[attr-defined]
AclOperation: Any = confluent_admin.AclOperation  # type: ignore[attr-defined]
AclPermissionType: Any = confluent_admin.AclPermissionType  # type: ignore[attr-defined]
ResourcePatternType: Any = confluent_admin.ResourcePatternType  # type: ignore[attr-defined]
ResourceType: Any = confluent_admin.ResourceType  # type: ignore[attr-defined]
ScramCredentialInfo: Any = confluent_admin.ScramCredentialInfo  # type: ignore[attr-defined]
ScramMechanism: Any = confluent_admin.ScramMechanism  # type: ignore[attr-defined]
UserScramCredentialUpsertion: Any = confluent_admin.UserScramCredentialUpsertion  # type: ignore[attr-defined]

pytestmark = [pytest.mark.clients, pytest.mark.integration]

TIMEOUT_S = 20.0
SECRET = "delegation-token-test-secret"
ALICE_PASSWORD = "alice-scram-secret"
TOPIC = "token-topic"
BROKER_PROPERTIES = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "delegation.token.secret.key": SECRET,
}


def until(attempt: Callable[[], Any], what: str) -> Any:
    """``attempt()``'s first truthy answer; it may raise ``SaslLoginFailed`` while waiting."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            answer = attempt()
        except (SaslLoginFailed, ConnectionError) as error:
            answer, last = None, error
        else:
            last = answer
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {last}")
        time.sleep(0.2)


def unix_ms() -> int:
    return time.time_ns() // 1_000_000


def admin(broker: SecureBroker) -> AdminClient:
    return AdminClient({
        "bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": PLAIN_USERS["admin"],
    })  # fmt: skip


def prepare_alice(broker: SecureBroker) -> None:
    """alice: a SCRAM-SHA-512 user (AlterUserScramCredentials) allowed WRITE and READ on TOPIC,
    which no other principal but the super user may use."""
    client = admin(broker)  # kept while its futures run
    upsertion = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), ALICE_PASSWORD.encode()
    )
    for future in client.alter_user_scram_credentials([upsertion]).values():
        future.result(timeout=TIMEOUT_S)
    bindings = [
        AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:alice", "*",
                   operation, AclPermissionType.ALLOW)
        for operation in (AclOperation.WRITE, AclOperation.READ)
    ]  # fmt: skip
    for future in client.create_acls(bindings).values():
        future.result(timeout=TIMEOUT_S)


def produce(connection: KafkaConnection, partition: int, value: bytes) -> tuple[int, int]:
    """Produce v8, acks=-1, one record: (error code, base offset)."""
    request = ProduceRequest(
        version=8, transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(
                index=partition, records=build_batch([SimpleRecord(value=value)])),
        ])],
    )  # fmt: skip
    body = connection.exchange(ApiKey.PRODUCE, 8, bytes(request.encode(version=8)))
    [answer] = ProduceResponse.decode(body, version=8).responses[0].partition_responses
    return answer.error_code, answer.base_offset


def fetch(connection: KafkaConnection, partition: int) -> list[bytes | None]:
    """Fetch v11 from offset 0 as a consumer: every value read."""
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1,
        topics=(FetchTopic((FetchPartition(partition, 0, 1 << 20),), topic=TOPIC),),
    )  # fmt: skip
    body = connection.exchange(ApiKey.FETCH, 11, encode_fetch_request(request, 11))
    [answer] = decode_fetch_response(body, 11).responses[0].partitions
    assert answer.error_code == Errors.NONE, answer
    data = b"".join(bytes(chunk) for chunk in answer.records or ())  # type: ignore[arg-type]
    return [r.value for position, _ in iter_batches(data) for r in iter_records(data, position)]


def alice(broker: SecureBroker) -> KafkaConnection:
    return scram_login(broker.sasl_port, "SCRAM-SHA-512", "alice", ALICE_PASSWORD)


def token_login(broker: SecureBroker, token_id: str, hmac: bytes, mechanism: str) -> Any:
    password = base64.b64encode(hmac).decode()
    return scram_login(broker.sasl_port, mechanism, token_id, password, token=True)


def create_token(connection: KafkaConnection) -> Any:
    """CreateDelegationToken v3 for the connection's own principal, Kafka's default lifetimes."""
    return connection.call(
        ApiKey.CREATE_DELEGATION_TOKEN, 3, owner_principal_type=None, owner_principal_name=None,
        renewers=[], max_lifetime_ms=-1,
    )  # fmt: skip


def expiry_call(broker: SecureBroker, api_key: ApiKey, hmac: bytes, period_ms: int) -> Any:
    """RenewDelegationToken or ExpireDelegationToken v2 by alice (her password login)."""
    renew = api_key == ApiKey.RENEW_DELEGATION_TOKEN
    field = "renew_period_ms" if renew else "expiry_time_period_ms"
    with alice(broker) as connection:
        return connection.call(api_key, 2, hmac=hmac, **{field: period_ms})


def test_a_token_logs_in_as_its_owner_on_every_broker_until_it_is_expired(
    cluster_factory: Any,  # noqa: F811
    brokers: list[BrokerProcess],  # noqa: F811
    tmp_path: Path,
) -> None:
    first, second = start_secure_brokers(
        cluster_factory, brokers, tmp_path, count=2, extra=BROKER_PROPERTIES,
        controller_extra={"delegation.token.secret.key": SECRET},
    )  # fmt: skip
    cluster = first.cluster
    # partition 0 led by broker 10 (first), partition 1 by broker 11 (second)
    body = {"name": TOPIC, "partitions": -1, "replication_factor": -1,
            "assignments": {"0": [10], "1": [11]}}  # fmt: skip
    cluster.request("POST", "/v1/topics", body)
    wait_for(lambda: cluster.request("GET", f"/v1/topics/{TOPIC}"))
    prepare_alice(first)

    def alice_writes() -> bool:
        with alice(first) as connection:
            return produce(connection, 0, b"by alice") == (Errors.NONE, 0)

    until(alice_writes, "alice's credential and ACLs on broker 10")
    # bob is authenticated too, but the ACLs allow only alice
    with scram_login(first.sasl_port, "SCRAM-SHA-512", "bob", SCRAM_USERS["bob"]) as bob:
        assert produce(bob, 0, b"by bob")[0] == Errors.TOPIC_AUTHORIZATION_FAILED

    with alice(first) as connection:
        created = create_token(connection)
    assert created.error_code == Errors.NONE, created
    assert (created.principal_type, created.principal_name) == ("User", "alice")
    # Unix times, as Kafka's (time.milliseconds()); Kafka's default 1 day expiry, 7 days max
    assert abs(created.issue_timestamp_ms - unix_ms()) < 10_000
    assert created.expiry_timestamp_ms - created.issue_timestamp_ms == 24 * 3600_000
    assert created.max_timestamp_ms - created.issue_timestamp_ms == 7 * 24 * 3600_000
    token_id, hmac = created.token_id, bytes(created.hmac)

    # (a) the token's login is alice: her ACLs let it write and read
    for_first = until(lambda: token_login(first, token_id, hmac, "SCRAM-SHA-256"), "the token")
    with for_first as connection:
        assert produce(connection, 0, b"by alice's token") == (Errors.NONE, 1)
        assert fetch(connection, 0) == [b"by alice", b"by alice's token"]
        # (b) a token's login may not use the token APIs
        refused = create_token(connection)
        assert refused.error_code == Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        renew = connection.call(ApiKey.RENEW_DELEGATION_TOKEN, 2, hmac=hmac, renew_period_ms=1)
        # KafkaApis answers DelegationTokenManager.ErrorTimestamp (-1) with this refusal
        assert (renew.error_code, renew.expiry_timestamp_ms) == (
            Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1,
        )  # fmt: skip
        described = connection.call(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, owners=None)
        assert (described.error_code, described.tokens) == (
            Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [],
        )  # fmt: skip

    # (c) a wrong HMAC: SASL_AUTHENTICATION_FAILED, then the broker closes the connection
    with pytest.raises(SaslLoginFailed) as failed:
        token_login(first, token_id, hmac[:-1] + bytes([hmac[-1] ^ 1]), "SCRAM-SHA-256")
    assert failed.value.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert failed.value.closed_by_peer

    # (e) the other broker derives the same credential from its own image
    for_second = until(lambda: token_login(second, token_id, hmac, "SCRAM-SHA-512"), "broker 11")
    with for_second as connection:
        assert produce(connection, 1, b"on broker 11") == (Errors.NONE, 0)
        assert fetch(connection, 1) == [b"on broker 11"]

    # (f) a restarted controller rebuilds the token from the metadata log and finds it by HMAC
    [controller] = cluster.controllers
    assert controller.stop() == 0
    controller.start()
    cluster.wait_for_leader()

    def renewal() -> Any:
        answer = expiry_call(first, ApiKey.RENEW_DELEGATION_TOKEN, hmac, 60_000)
        return answer if answer.error_code == Errors.NONE else None

    renewed = until(renewal, "a renewal through the restarted controller")
    assert 0 <= unix_ms() + 60_000 - renewed.expiry_timestamp_ms < 10_000

    def described_on_second() -> Any:
        """The token as broker 11's image has it, once it holds the renewal's record."""
        with alice(second) as connection:
            answer = connection.call(ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, owners=None)
        [token] = answer.tokens
        return token if token.expiry_timestamp == renewed.expiry_timestamp_ms else None

    described = until(described_on_second, "broker 11 to replay the renewal")
    assert (described.token_id, bytes(described.hmac)) == (token_id, hmac)  # derived again
    for broker in (first, second):
        token_login(broker, token_id, hmac, "SCRAM-SHA-512").close()

    # (d) period -1 expires the token at once; the response carries the controller's time
    before_ms = unix_ms()
    expired = expiry_call(first, ApiKey.EXPIRE_DELEGATION_TOKEN, hmac, -1)
    assert expired.error_code == Errors.NONE
    assert before_ms - 1000 <= expired.expiry_timestamp_ms <= unix_ms() + 1000
    for broker in (first, second):

        def refused_login(broker: SecureBroker = broker) -> bool:
            try:
                token_login(broker, token_id, hmac, "SCRAM-SHA-256").close()
            except SaslLoginFailed as failure:
                return failure.error_code == Errors.SASL_AUTHENTICATION_FAILED
            return False

        until(refused_login, f"broker {broker.broker.node_id} to refuse the expired token")
