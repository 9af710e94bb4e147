"""Real clients against a broker with ``authorizer.class.name`` set (1 controller, 1 broker;
``tests.secure_broker``): ACLs and SCRAM users are made through the Kafka APIs
(confluent-kafka's AdminClient: CreateAcls, AlterUserScramCredentials), then kafka-python and
confluent-kafka clients meet them.

``User:admin`` (SASL/PLAIN) is the only super user; ``carol`` is a SCRAM-SHA-512 user created
in each test through AlterUserScramCredentials, so her login reads the metadata image's
KIP-554 credential. Each test waits for an *allowed* outcome of the ACLs it made before it
checks a refusal, so a refusal cannot come from ACLs that have not reached the broker yet.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka.admin as confluent_admin
import pytest
from confluent_kafka import KafkaError as ConfluentError
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from tests.integration.conftest import brokers, cluster_factory, http  # noqa: F401 (fixtures)
from tests.integration.test_broker_process import BrokerProcess, wait_for
from tests.secure_broker import SecureBroker, start_secure_brokers
from tests.tls_material import PLAIN_USERS

# confluent-kafka's ACL and SCRAM types: its package does not re-export them (mypy strict).
AclBinding: Any = confluent_admin.AclBinding  # type: ignore[attr-defined]
AclBindingFilter: Any = confluent_admin.AclBindingFilter  # type: ignore[attr-defined]
AclOperation: Any = confluent_admin.AclOperation  # type: ignore[attr-defined]
AclPermissionType: Any = confluent_admin.AclPermissionType  # type: ignore[attr-defined]
ResourcePatternType: Any = confluent_admin.ResourcePatternType  # type: ignore[attr-defined]
ResourceType: Any = confluent_admin.ResourceType  # type: ignore[attr-defined]
ScramCredentialInfo: Any = confluent_admin.ScramCredentialInfo  # type: ignore[attr-defined]
ScramMechanism: Any = confluent_admin.ScramMechanism  # type: ignore[attr-defined]
UserScramCredentialUpsertion: Any = confluent_admin.UserScramCredentialUpsertion  # type: ignore[attr-defined]

pytestmark = [pytest.mark.clients, pytest.mark.integration]

TIMEOUT_S = 30.0
CAROL_PASSWORD = "carol-secret"
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
}


@pytest.fixture
def broker(
    cluster_factory: Any,  # noqa: F811
    brokers: list[BrokerProcess],  # noqa: F811
    tmp_path: Path,
) -> SecureBroker:
    return start_secure_brokers(cluster_factory, brokers, tmp_path, extra=AUTHORIZER)[0]


def sasl_admin(broker: SecureBroker, mechanism: str, name: str, password: str) -> AdminClient:
    """confluent-kafka's AdminClient over SASL_PLAINTEXT."""
    return AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": name,
            "sasl.password": password,
        }
    )


def admin(broker: SecureBroker) -> AdminClient:
    return sasl_admin(broker, "PLAIN", "admin", PLAIN_USERS["admin"])


def carol(broker: SecureBroker, password: str = CAROL_PASSWORD) -> dict[str, Any]:
    """kafka-python settings for carol over SASL_PLAINTEXT with SCRAM-SHA-512."""
    return {
        "bootstrap_servers": f"127.0.0.1:{broker.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "carol",
        "sasl_plain_password": password,
        "request_timeout_ms": 10_000,
        # A refused login fails bootstrap: kafka-python would wait 30 s for a first broker.
        "bootstrap_timeout_ms": 10_000,
    }


def create_carol(broker: SecureBroker) -> None:
    """AlterUserScramCredentials through the Kafka API (the client salts the password)."""
    upsertion = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), CAROL_PASSWORD.encode()
    )
    client = admin(broker)  # kept while its futures run
    futures = client.alter_user_scram_credentials([upsertion])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def allow(
    broker: SecureBroker,
    resource: Any,
    name: str,
    operation: Any,
    pattern: Any = ResourcePatternType.LITERAL,
    permission: Any = AclPermissionType.ALLOW,
    principal: str = "User:carol",
) -> None:
    binding = AclBinding(resource, name, pattern, principal, "*", operation, permission)
    client = admin(broker)  # kept while its futures run
    for future in client.create_acls([binding]).values():
        future.result(timeout=TIMEOUT_S)


def topic(broker: SecureBroker, name: str) -> str:
    body = {"name": name, "partitions": 1, "replication_factor": 1}
    broker.cluster.request("POST", "/v1/topics", body)
    wait_for(lambda: broker.cluster.request("GET", f"/v1/topics/{name}"))
    return name


def until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def topics_carol_sees(broker: SecureBroker) -> set[str]:
    client = KafkaAdminClient(**carol(broker))
    try:
        return set(client.list_topics())
    finally:
        client.close()


def carol_sees(broker: SecureBroker, name: str) -> Callable[[], bool]:
    return lambda: name in topics_carol_sees(broker)


def carol_admin(broker: SecureBroker) -> AdminClient:
    return sasl_admin(broker, "SCRAM-SHA-512", "carol", CAROL_PASSWORD)


# No librdkafka client in a test's frame that an exception's traceback keeps (a kafka-python
# error under pytest.raises, a confluent future's raised error): the frame outlived its test,
# and its AdminClient went on reconnecting to the stopped broker for the rest of the session
# (and could reach a later test's broker on the same port).
def scram_credential_infos(broker: SecureBroker, user: str) -> list[Any]:
    client = admin(broker)  # kept while its future runs
    described: Any = client.describe_user_scram_credentials([user])
    return list(described[user].result(timeout=TIMEOUT_S).scram_credential_infos)


def create_acls_error(client: AdminClient, binding: AclBinding) -> int:
    """CreateAcls' error code (NO_ERROR when created). Taken, not raised: ``result()`` raises
    the error its future keeps, whose traceback then ties the future to the caller's frames
    and so to the client, a cycle through librdkafka's C objects that is never collected."""
    for future in client.create_acls([binding]).values():
        error = future.exception(timeout=TIMEOUT_S)
        if error is not None:
            return int(error.args[0].code())
    return ConfluentError.NO_ERROR


def metadata_error_for_carol(broker: SecureBroker, name: str) -> int:
    """The error Metadata answers carol for a topic she names (confluent-kafka)."""
    found = carol_admin(broker).list_topics(topic=name, timeout=TIMEOUT_S).topics[name]
    return ConfluentError.NO_ERROR if found.error is None else int(found.error.code())


def produce_as_carol(broker: SecureBroker, name: str, value: bytes) -> int:
    producer = KafkaProducer(
        **carol(broker), acks="all", enable_idempotence=False, max_block_ms=10_000, retries=0
    )
    try:
        return int(producer.send(name, value).get(timeout=TIMEOUT_S).offset)
    finally:
        producer.close()


def test_a_scram_user_made_with_alter_user_scram_credentials_logs_in(
    broker: SecureBroker, caplog: pytest.LogCaptureFixture
) -> None:
    create_carol(broker)
    infos = scram_credential_infos(broker, "carol")
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 4096)]
    # The login reads the broker's image: it works once the credential has reached it.
    until(lambda: isinstance(topics_carol_sees(broker), set), "carol's login")
    caplog.clear()
    with pytest.raises(KafkaError):
        KafkaAdminClient(**carol(broker, "wrong"))
    assert "[Error 58] SaslAuthenticationFailedError" in caplog.text


def test_a_user_without_write_gets_topic_authorization_failed_and_nothing_is_written(
    broker: SecureBroker,
) -> None:
    name = topic(broker, "payments")
    create_carol(broker)
    allow(broker, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    until(carol_sees(broker, name), "carol's DESCRIBE")
    with pytest.raises(TopicAuthorizationFailedError):
        produce_as_carol(broker, name, b"not allowed")
    assert broker.log_end_offset(name) == 0
    allow(broker, ResourceType.TOPIC, name, AclOperation.WRITE)

    def written() -> bool:
        try:
            return produce_as_carol(broker, name, b"allowed") == 0
        except TopicAuthorizationFailedError:
            return False

    until(written, "carol's WRITE")
    assert broker.log_end_offset(name) == 1


def test_a_user_without_describe_does_not_see_the_topic(broker: SecureBroker) -> None:
    visible, hidden = topic(broker, "visible"), topic(broker, "hidden")
    create_carol(broker)
    allow(broker, ResourceType.TOPIC, visible, AclOperation.READ)  # READ implies DESCRIBE
    until(carol_sees(broker, visible), "carol's READ")
    assert topics_carol_sees(broker) == {visible}
    # Named explicitly, the topic answers TOPIC_AUTHORIZATION_FAILED (not "unknown").
    assert metadata_error_for_carol(broker, hidden) == ConfluentError.TOPIC_AUTHORIZATION_FAILED
    assert metadata_error_for_carol(broker, visible) == ConfluentError.NO_ERROR


def test_prefixed_acls_as_in_standard_authorizer_test_test_prefix_acls(
    broker: SecureBroker,
) -> None:
    """``StandardAuthorizerTest.testPrefixAcls``: bob (here carol) with ALL on PREFIXED "f" and
    LITERAL "foobar" may WRITE "foobarr" but not READ (nor write) "goobar"."""
    foobarr, goobar = topic(broker, "foobarr"), topic(broker, "goobar")
    create_carol(broker)
    allow(broker, ResourceType.TOPIC, "foobar", AclOperation.ALL)
    allow(broker, ResourceType.TOPIC, "f", AclOperation.ALL, ResourcePatternType.PREFIXED)
    until(carol_sees(broker, foobarr), "the prefixed ACL")
    assert produce_as_carol(broker, foobarr, b"prefixed") == 0
    assert goobar not in topics_carol_sees(broker)
    with pytest.raises(KafkaError):
        produce_as_carol(broker, goobar, b"no")
    assert broker.log_end_offset(goobar) == 0


def test_deny_precedence_as_in_standard_authorizer_test_with_operation_all(
    broker: SecureBroker,
) -> None:
    """``StandardAuthorizerTest.testDenyPrecedenceWithOperationAll`` (alice here is carol):
    DENY ALL on LITERAL "foo" for carol and for User:*, ALLOW READ on PREFIXED "foo" for carol,
    ALLOW DESCRIBE on PREFIXED "foo" for User:*: WRITE, READ and DESCRIBE of "foo" are denied,
    READ of "foobar" is allowed."""
    foo, foobar = topic(broker, "foo"), topic(broker, "foobar")
    create_carol(broker)
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    deny = AclPermissionType.DENY
    allow(broker, ResourceType.TOPIC, "foo", AclOperation.ALL, literal, deny)
    allow(broker, ResourceType.TOPIC, "foo", AclOperation.READ, prefixed)
    allow(broker, ResourceType.TOPIC, "foo", AclOperation.ALL, literal, deny, "User:*")
    allow(broker, ResourceType.TOPIC, "foo", AclOperation.DESCRIBE, prefixed, principal="User:*")
    until(carol_sees(broker, foobar), "carol's READ on the prefix")
    assert foo not in topics_carol_sees(broker)  # DESCRIBE denied
    with pytest.raises(KafkaError):
        produce_as_carol(broker, foo, b"denied")  # WRITE denied
    assert broker.log_end_offset(foo) == 0
    assert metadata_error_for_carol(broker, foo) == ConfluentError.TOPIC_AUTHORIZATION_FAILED
    assert metadata_error_for_carol(broker, foobar) == ConfluentError.NO_ERROR
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{broker.sasl_port}", security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username="admin",
        sasl_plain_password=PLAIN_USERS["admin"], acks="all", enable_idempotence=False,
    )  # fmt: skip
    try:
        producer.send(foobar, b"readable").get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        foobar, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **carol(broker)
    )
    try:
        # READ allowed. One record and no more: the log holds just it (the idle timeout only
        # bounds the wait for it, instead of being waited out after it).
        assert [record.value for record in itertools.islice(consumer, 1)] == [b"readable"]
    finally:
        consumer.close()
    assert broker.log_end_offset(foobar) == 1


def test_a_consumer_without_group_read_is_refused(broker: SecureBroker) -> None:
    name = topic(broker, "orders")
    create_carol(broker)
    allow(broker, ResourceType.TOPIC, name, AclOperation.READ)
    # DESCRIBE on the group lets FindCoordinator through; JoinGroup needs READ.
    allow(broker, ResourceType.GROUP, "billing", AclOperation.DESCRIBE)
    until(carol_sees(broker, name), "carol's READ")
    consumer = KafkaConsumer(name, group_id="billing", **carol(broker))
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=10_000)
            consumer.poll(timeout_ms=10_000)
    finally:
        consumer.close()


def test_plaintext_clients_lose_the_brokers_authority_over_topics(broker: SecureBroker) -> None:
    """Admin requests are forwarded to the controller under the broker's identity, so the
    broker's checks are the only ones the client's principal meets: an anonymous PLAINTEXT
    client can neither create nor delete a topic, and the cluster is unchanged."""
    kept = topic(broker, "kept")
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            client.create_topics([NewTopic("created-anonymously", 1, 1)])
        with pytest.raises(TopicAuthorizationFailedError):
            client.delete_topics([kept])
    finally:
        client.close()
    names = {t["name"] for t in broker.cluster.request("GET", "/v1/topics")["topics"]}
    assert names == {kept}


def test_acls_are_listed_and_deleted_through_the_kafka_apis(broker: SecureBroker) -> None:
    allow(broker, ResourceType.TOPIC, "audit", AclOperation.READ)
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    client = admin(broker)
    listed = client.describe_acls(everything).result(timeout=TIMEOUT_S)
    assert [(b.name, b.principal, b.operation) for b in listed] == [
        ("audit", "User:carol", AclOperation.READ)
    ]
    deleted = client.delete_acls([everything])
    assert [len(f.result(timeout=TIMEOUT_S)) for f in deleted.values()] == [1]
    assert client.describe_acls(everything).result(timeout=TIMEOUT_S) == []
    # Without ALTER on the cluster, CreateAcls is CLUSTER_AUTHORIZATION_FAILED.
    create_carol(broker)
    until(lambda: isinstance(topics_carol_sees(broker), set), "carol's login")
    as_carol = carol_admin(broker)
    binding = AclBinding(
        ResourceType.TOPIC, "audit", ResourcePatternType.LITERAL, "User:carol", "*",
        AclOperation.ALL, AclPermissionType.ALLOW,
    )  # fmt: skip
    assert create_acls_error(as_carol, binding) == ConfluentError.CLUSTER_AUTHORIZATION_FAILED
