"""The broker's authorization: the API -> checks table, the authorizer holder, and the handlers'
refusals with Kafka's error codes, through ``KafkaApis.dispatch`` with a principal on the
request context (the harness broker leads ``pets``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import scramp
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from pykraft.broker import kafka_apis as kafka_apis_module
from pykraft.broker.authorization import (
    API_ACL_CHECKS,
    AuthorizerNotReadyError,
    RequestAuthorizer,
)
from pykraft.broker.authorization_scram import ImageScramCredentials
from pykraft.broker.config import BrokerConfig
from pykraft.broker.handlers import broker_handlers
from pykraft.broker.handlers.services import topic_uuid
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.network import RequestContext
from pykraft.broker.sasl_mechanisms import SaslError, ScramServer
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.authorizer import AuthorizerSettings
from pykraft.metadata.auth.images import AclsDelta, AclsImage, ScramDelta, ScramImage
from pykraft.metadata.auth.principal import KafkaPrincipal, user
from pykraft.metadata.auth.scram import ScramMechanism, credential_from_password
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS, decode_response, request_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import (
    RequestHeader,
    parse_response_header,
    request_header_version,
    response_header_version,
)
from pykraft.storage.file_slice import FileSlice
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    PETS0,
    PETS_ID,
    Cluster,
    batch,
    encode,
    pets_led_here,
    services,
)

CAROL = user("carol")
ADMIN = user("admin")
SETTINGS = AuthorizerSettings.from_config("User:admin")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_led_here())


def acls(*bindings: AclBinding) -> AclsImage:
    delta = AclsDelta(AclsImage.EMPTY)
    for index, binding in enumerate(bindings):
        delta.replay(binding.to_record(f"acl-{index}"))
    return delta.apply()


def acl(
    operation: AclOperation,
    name: str = "pets",
    resource_type: ResourceType = ResourceType.TOPIC,
    principal: str = "User:carol",
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        resource_type=resource_type, resource_name=name, pattern_type=PatternType.LITERAL,
        principal=principal, host="*", operation=operation, permission_type=permission,
    )  # fmt: skip


def authorizer(*bindings: AclBinding) -> RequestAuthorizer:
    holder = RequestAuthorizer(SETTINGS)
    holder.update(acls(*bindings))
    return holder


def apis_for(cluster: Cluster, holder: RequestAuthorizer) -> KafkaApis:
    apis = KafkaApis()
    apis.register_all(
        broker_handlers(services(cluster, authorizer=holder), producer_ids=_OneProducerId())
    )
    return apis


class _OneProducerId:
    async def generate_producer_id(self) -> int | None:
        return 7


def context(api_key: ApiKey, version: int, principal: KafkaPrincipal = CAROL) -> RequestContext:
    header = RequestHeader(
        api_key, version, 11, "harness", request_header_version(api_key, version)
    )
    return RequestContext(header, "local-remote-0", "PLAINTEXT", "127.0.0.1", 50000, principal)


def dispatch(
    apis: KafkaApis, api_key: ApiKey, version: int, request: Any, principal: KafkaPrincipal = CAROL
) -> bytes:
    async def run() -> bytes:
        body = memoryview(bytearray(encode(request, version)))
        segments = await apis.dispatch(context(api_key, version, principal), body)
        assert segments is not None
        return segments.to_bytes(
            lambda part: FileSlice(part.path, part.position, part.length).read_bytes()
        )

    frame = asyncio.run(run())
    _, start = parse_response_header(frame[4:], response_header_version(api_key, version))
    return frame[4 + start :]


def produce(value: bytes = b"v") -> Any:
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=0, records=bytes(batch(value))
    )
    return ProduceRequest(
        version=10, transactional_id=None, acks=1, timeout_ms=1000,
        topic_data=[ProduceRequest.TopicProduceData(name="pets", partition_data=[partition])],
    )  # fmt: skip


def produce_error(apis: KafkaApis, principal: KafkaPrincipal = CAROL) -> int:
    answer = ProduceResponse.decode(
        dispatch(apis, ApiKey.PRODUCE, 10, produce(), principal), version=10
    )
    return int(answer.responses[0].partition_responses[0].error_code)


def log_end_offset(cluster: Cluster) -> int:
    return int(cluster.replica_manager.partitions[PETS0].log_end_offset)


# ------------------------------------------------------------------ the table


def test_every_advertised_api_says_what_kafka_authorizes() -> None:
    assert set(API_ACL_CHECKS) == set(SUPPORTED_API_VERSIONS)


def test_kafka_apis_refuses_an_api_without_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    unchecked = {k: v for k, v in API_ACL_CHECKS.items() if k is not ApiKey.PRODUCE}
    monkeypatch.setattr(kafka_apis_module, "API_ACL_CHECKS", unchecked)

    async def handler(context: RequestContext, body: memoryview) -> bytes:
        return b""

    with pytest.raises(ValueError, match="API_ACL_CHECKS"):
        KafkaApis().register(ApiKey.PRODUCE, handler)


# ------------------------------------------------------------------ the holder


def test_without_an_authorizer_everything_is_allowed() -> None:
    holder = RequestAuthorizer(None)
    assert holder.authorize(context(ApiKey.METADATA, 12), AclOperation.ALTER, ResourceType.CLUSTER)


def test_before_the_first_image_only_super_users_are_allowed() -> None:
    """StandardAuthorizerData.authorize: super users before loadingComplete, else
    AuthorizerNotReadyException."""
    holder = RequestAuthorizer(SETTINGS)
    as_admin = context(ApiKey.METADATA, 12, ADMIN)
    assert holder.authorize(as_admin, AclOperation.ALTER, ResourceType.CLUSTER)
    with pytest.raises(AuthorizerNotReadyError):
        holder.authorize(context(ApiKey.METADATA, 12), AclOperation.DESCRIBE, ResourceType.TOPIC)


def test_the_authorizer_is_rebuilt_only_when_the_acls_change() -> None:
    holder = RequestAuthorizer(SETTINGS)
    first = acls(acl(AclOperation.READ))
    assert holder.update(first)
    assert not holder.update(first)
    carol = context(ApiKey.FETCH, 12)
    assert holder.authorize(carol, AclOperation.READ, ResourceType.TOPIC, "pets")
    assert holder.update(acls())
    assert not holder.authorize(carol, AclOperation.READ, ResourceType.TOPIC, "pets")


def test_a_request_before_the_acls_are_loaded_answers_unknown_server_error(
    cluster: Cluster,
) -> None:
    apis = apis_for(cluster, RequestAuthorizer(SETTINGS))
    assert produce_error(apis) == Errors.UNKNOWN_SERVER_ERROR
    assert log_end_offset(cluster) == 0


def test_authorizer_properties_follow_kafkas_names() -> None:
    base = {"node.id": "1", "controller.quorum.bootstrap.servers": "127.0.0.1:9093"}
    assert BrokerConfig.from_properties(base).authorizer is None
    config = BrokerConfig.from_properties(
        {
            **base,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:broker",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    assert config.authorizer == AuthorizerSettings(frozenset({"User:admin", "User:broker"}), True)


# ------------------------------------------------------------------ handlers


def test_produce_without_write_is_topic_authorization_failed_and_appends_nothing(
    cluster: Cluster,
) -> None:
    apis = apis_for(cluster, authorizer(acl(AclOperation.DESCRIBE)))
    assert produce_error(apis) == Errors.TOPIC_AUTHORIZATION_FAILED
    assert log_end_offset(cluster) == 0
    assert produce_error(apis, ADMIN) == Errors.NONE
    assert log_end_offset(cluster) == 1


def test_a_deny_wins_over_an_allow_for_produce(cluster: Cluster) -> None:
    deny = acl(AclOperation.WRITE, permission=AclPermissionType.DENY)
    apis = apis_for(cluster, authorizer(acl(AclOperation.ALL), deny))
    assert produce_error(apis) == Errors.TOPIC_AUTHORIZATION_FAILED
    assert log_end_offset(cluster) == 0


def metadata(apis: KafkaApis, topics: list[str] | None) -> Any:
    named = (
        None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    )
    request = MetadataRequest(
        version=12, topics=named, allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    )  # fmt: skip
    return MetadataResponse.decode(dispatch(apis, ApiKey.METADATA, 12, request), version=12)


def test_metadata_hides_topics_not_described_and_refuses_them_by_name(cluster: Cluster) -> None:
    apis = apis_for(cluster, authorizer())
    assert metadata(apis, None).topics == []
    [named] = metadata(apis, ["pets"]).topics
    assert (named.name, named.error_code, named.partitions) == (
        "pets",
        Errors.TOPIC_AUTHORIZATION_FAILED,
        [],
    )
    # A topic that does not exist is refused the same way: existence does not leak.
    [missing] = metadata(apis, ["nothing-here"]).topics
    assert missing.error_code == Errors.TOPIC_AUTHORIZATION_FAILED


def test_metadata_reports_the_topics_authorized_operations(cluster: Cluster) -> None:
    apis = apis_for(cluster, authorizer(acl(AclOperation.READ)))
    [pets] = metadata(apis, None).topics
    assert pets.name == "pets"
    # KIP-430: READ, and DESCRIBE which READ implies (StandardAuthorizerData).
    assert pets.authorized_operations == {AclOperation.READ, AclOperation.DESCRIBE}


def test_metadata_reports_the_operations_on_a_topic_that_does_not_exist(cluster: Cluster) -> None:
    """Kafka sets them on every topic it describes, unknown ones included."""
    apis = apis_for(cluster, authorizer(acl(AclOperation.READ, name="nothing-here")))
    [missing] = metadata(apis, ["nothing-here"]).topics
    assert missing.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.authorized_operations == {AclOperation.READ, AclOperation.DESCRIBE}


def fetch(replica_id: int) -> Any:
    partition = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 20,
    )  # fmt: skip
    return FetchRequest(
        version=12, replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic="pets", partitions=[partition])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip


def fetch_error(apis: KafkaApis, replica_id: int) -> int:
    answer = FetchResponse.decode(dispatch(apis, ApiKey.FETCH, 12, fetch(replica_id)), version=12)
    return int(answer.responses[0].partitions[0].error_code)


def test_fetch_needs_read_and_a_follower_needs_cluster_action(cluster: Cluster) -> None:
    apis = apis_for(cluster, authorizer(acl(AclOperation.READ)))
    assert fetch_error(apis, -1) == Errors.NONE
    # READ on the topic is not enough to fetch as a replica (KafkaApis: CLUSTER_ACTION).
    assert fetch_error(apis, 2) == Errors.TOPIC_AUTHORIZATION_FAILED
    unread = apis_for(cluster, authorizer(acl(AclOperation.DESCRIBE)))
    assert fetch_error(unread, -1) == Errors.TOPIC_AUTHORIZATION_FAILED


def init_producer_id_error(apis: KafkaApis) -> int:
    request = InitProducerIdRequest(
        version=4, transactional_id=None, transaction_timeout_ms=60000,
        producer_id=-1, producer_epoch=-1,
    )  # fmt: skip
    answer = InitProducerIdResponse.decode(
        dispatch(apis, ApiKey.INIT_PRODUCER_ID, 4, request), version=4
    )
    return int(answer.error_code)


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(cluster: Cluster) -> None:
    """KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic, is enough."""
    assert init_producer_id_error(apis_for(cluster, authorizer())) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED
    )
    assert init_producer_id_error(apis_for(cluster, authorizer(acl(AclOperation.WRITE)))) == (
        Errors.NONE
    )
    idempotent = acl(AclOperation.IDEMPOTENT_WRITE, "kafka-cluster", ResourceType.CLUSTER)
    assert init_producer_id_error(apis_for(cluster, authorizer(idempotent))) == Errors.NONE


def describe_acls_error(apis: KafkaApis) -> int:
    request = request_class(ApiKey.DESCRIBE_ACLS)(
        version=3, resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    body = dispatch(apis, ApiKey.DESCRIBE_ACLS, 3, request)
    return int(decode_response(ApiKey.DESCRIBE_ACLS, 3, body).error_code)


def test_the_acl_apis_answer_security_disabled_without_an_authorizer(cluster: Cluster) -> None:
    """AclApis: "No Authorizer is configured." as SECURITY_DISABLED."""
    assert describe_acls_error(apis_for(cluster, RequestAuthorizer(None))) == (
        Errors.SECURITY_DISABLED
    )
    assert describe_acls_error(apis_for(cluster, authorizer())) == (
        Errors.CLUSTER_AUTHORIZATION_FAILED
    )


# ------------------------------------------------------------------ SCRAM from the image


def scram_login(source: ImageScramCredentials, password: str) -> str:
    """One SCRAM-SHA-512 exchange (scramp's client) against the broker's SASL server."""
    client = scramp.ScramClient(["SCRAM-SHA-512"], "carol", password)
    server = ScramServer("SCRAM-SHA-512", source, nonce="server-nonce-for-tests")
    server_first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(server_final.decode())
    assert server.complete
    return server.authorization_id


def test_scram_logins_read_the_current_images_credentials() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_512
    credential = credential_from_password(mechanism, "carol-secret", b"0123456789abcdef", 4096)
    delta = ScramDelta(ScramImage.EMPTY)
    delta.replay(credential.to_record("carol", mechanism))
    images = [attrs.evolve(MetadataImage.EMPTY, scram=delta.apply())]
    source = ImageScramCredentials(lambda: images[-1])
    assert scram_login(source, "carol-secret") == "carol"
    with pytest.raises(SaslError):
        scram_login(source, "wrong")
    images.append(MetadataImage.EMPTY)  # the credential was removed
    with pytest.raises(SaslError):
        scram_login(source, "carol-secret")


def describe_cluster_operations(apis: KafkaApis) -> Any:
    request = request_class(ApiKey.DESCRIBE_CLUSTER)(
        version=1, include_cluster_authorized_operations=True, endpoint_type=1
    )
    body = dispatch(apis, ApiKey.DESCRIBE_CLUSTER, 1, request)
    return decode_response(ApiKey.DESCRIBE_CLUSTER, 1, body).authorized_operations


def test_describe_cluster_reports_authorized_operations_only_with_describe(
    cluster: Cluster,
) -> None:
    """KIP-430 / ``handleDescribeCluster``: none without DESCRIBE on the cluster."""
    on_cluster = ResourceType.CLUSTER
    alter = acl(AclOperation.ALTER, "kafka-cluster", on_cluster)
    # ALTER implies DESCRIBE (StandardAuthorizerData), so ALTER alone reports both.
    assert describe_cluster_operations(apis_for(cluster, authorizer(alter))) == {
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    }
    denied = acl(
        AclOperation.DESCRIBE, "kafka-cluster", on_cluster, permission=AclPermissionType.DENY
    )
    assert describe_cluster_operations(apis_for(cluster, authorizer(alter, denied))) == set()


def test_a_topic_asked_for_by_id_is_refused_without_its_name(cluster: Cluster) -> None:
    """``handleTopicMetadataRequest``: topic ids are not sensitive, names are."""
    apis = apis_for(cluster, authorizer())
    topic_id = topic_uuid(PETS_ID)
    request = MetadataRequest(
        version=12, topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=topic_id)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False,
    )  # fmt: skip
    answer = MetadataResponse.decode(dispatch(apis, ApiKey.METADATA, 12, request), version=12)
    [refused] = answer.topics
    assert (refused.error_code, refused.name, refused.topic_id) == (
        Errors.TOPIC_AUTHORIZATION_FAILED,
        None,
        topic_id,
    )
