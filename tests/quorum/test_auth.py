"""The doors' decisions (quorum/auth.py): every route's access column against a table of grants.

The fake authorizer allows exactly the (principal, operation, resource type, resource name)
tuples it is given, so each case reads as "with these ACLs, may this principal use this route".
The operations per route are ControllerApis' (cited in metadata/api/routes.py).
"""

from __future__ import annotations

import attrs
import pytest
from immutables import Map

from pykraft.metadata.api import routes
from pykraft.metadata.api.routes import Route
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.images import AclsImage
from pykraft.metadata.auth.principal import ANONYMOUS, KafkaPrincipal, user
from pykraft.protocol.errors import Errors
from pykraft.quorum.auth import (
    CLUSTER,
    CLUSTER_NAME,
    GROUP,
    TOPIC,
    BrokerBinding,
    BrokerBindingError,
    ImageAuthorizer,
    check_route,
    describable,
)

Grant = tuple[KafkaPrincipal, str, str, str]
ADMIN = user("admin")
BROKER_1 = user("broker-1")
BROKER_2 = user("broker-2")
ALICE = user("alice")


@attrs.frozen
class TableAuthorizer:
    grants: frozenset[Grant]

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: str,
        resource_type: str,
        resource_name: str,
    ) -> bool:
        return (principal, operation, resource_type, resource_name) in self.grants


def cluster(principal: KafkaPrincipal, operation: str) -> Grant:
    return (principal, operation, CLUSTER, CLUSTER_NAME)


def topic(principal: KafkaPrincipal, operation: str, name: str) -> Grant:
    return (principal, operation, TOPIC, name)


def check(
    route: Route,
    principal: KafkaPrincipal,
    grants: list[Grant],
    expected: Errors,
    topic_name: str | None = None,
) -> None:
    refusal = check_route(
        TableAuthorizer(frozenset(grants)), principal, "127.0.0.1", route.access, topic=topic_name
    )
    assert (Errors.NONE if refusal is None else refusal.error) is expected
    if refusal is not None:
        assert str(principal) in refusal.message


OK = Errors.NONE
CLUSTER_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED


def test_broker_rpcs_and_the_metadata_log_need_cluster_action() -> None:
    for route in (
        routes.REGISTER_BROKER,
        routes.BROKER_HEARTBEAT,
        routes.ALTER_PARTITION,
        routes.ALLOCATE_PRODUCER_IDS,
        routes.METADATA_RECORDS,
        routes.LIST_SNAPSHOTS,
        routes.GET_SNAPSHOT,
    ):
        check(route, BROKER_1, [cluster(BROKER_1, "CLUSTER_ACTION")], OK)
        check(route, ANONYMOUS, [], CLUSTER_DENIED)
        # ALTER or DESCRIBE on the cluster is not CLUSTER_ACTION.
        check(route, ADMIN, [cluster(ADMIN, "ALTER"), cluster(ADMIN, "DESCRIBE")], CLUSTER_DENIED)


def test_cluster_wide_admin_routes() -> None:
    check(routes.UNREGISTER_BROKER, ADMIN, [cluster(ADMIN, "ALTER")], OK)
    check(routes.UNREGISTER_BROKER, BROKER_1, [cluster(BROKER_1, "CLUSTER_ACTION")], CLUSTER_DENIED)
    check(routes.ELECT_LEADERS, ADMIN, [cluster(ADMIN, "ALTER")], OK)
    check(routes.ELECT_LEADERS, ALICE, [cluster(ALICE, "DESCRIBE")], CLUSTER_DENIED)
    # KIP-455: ControllerApis' alter/listPartitionReassignments (ALTER / DESCRIBE on the cluster).
    check(routes.ALTER_PARTITION_REASSIGNMENTS, ADMIN, [cluster(ADMIN, "ALTER")], OK)
    check(routes.ALTER_PARTITION_REASSIGNMENTS, ALICE, [cluster(ALICE, "DESCRIBE")], CLUSTER_DENIED)
    for route in (
        routes.QUORUM,
        routes.CLUSTER,
        routes.LIST_BROKERS,
        routes.LIST_PARTITION_REASSIGNMENTS,
    ):
        check(route, ALICE, [cluster(ALICE, "DESCRIBE")], OK)
        check(route, ANONYMOUS, [], CLUSTER_DENIED)


def test_acls_and_scram_credentials_are_cluster_alter_or_describe() -> None:
    for write in (routes.CREATE_ACLS, routes.DELETE_ACLS, routes.ALTER_SCRAM_CREDENTIALS):
        check(write, ADMIN, [cluster(ADMIN, "ALTER")], OK)
        check(write, ALICE, [cluster(ALICE, "DESCRIBE")], CLUSTER_DENIED)
    for read in (routes.DESCRIBE_ACLS, routes.DESCRIBE_SCRAM_CREDENTIALS):
        check(read, ALICE, [cluster(ALICE, "DESCRIBE")], OK)
        check(read, ANONYMOUS, [], CLUSTER_DENIED)


def test_a_route_without_a_column_needs_alter_on_the_cluster() -> None:
    new_route = Route("POST", "/v1/something-new")
    check(new_route, ALICE, [cluster(ALICE, "DESCRIBE")], CLUSTER_DENIED)
    check(new_route, ADMIN, [cluster(ADMIN, "ALTER")], OK)


def test_create_topic_needs_create_on_the_cluster_or_on_the_topic() -> None:
    # ControllerApis.handleCreateTopics: CREATE on CLUSTER, else CREATE on each TOPIC.
    route = routes.CREATE_TOPIC
    check(route, ADMIN, [cluster(ADMIN, "CREATE")], OK, "orders")
    check(route, ALICE, [topic(ALICE, "CREATE", "orders")], OK, "orders")
    check(route, ALICE, [topic(ALICE, "CREATE", "orders")], TOPIC_DENIED, "__consumer_offsets")
    check(route, ANONYMOUS, [], TOPIC_DENIED, "__consumer_offsets")


def test_delete_topic_needs_delete_on_the_cluster_or_on_that_topic() -> None:
    # ControllerApis.handleDeleteTopics: hasClusterAuth = DELETE on CLUSTER, else per TOPIC.
    route = routes.DELETE_TOPIC
    check(route, ADMIN, [cluster(ADMIN, "DELETE")], OK, "orders")
    check(route, ALICE, [topic(ALICE, "DELETE", "orders")], OK, "orders")
    check(route, ALICE, [topic(ALICE, "DELETE", "orders")], TOPIC_DENIED, "payments")
    check(route, ALICE, [topic(ALICE, "DESCRIBE", "orders")], TOPIC_DENIED, "orders")
    check(route, ANONYMOUS, [], TOPIC_DENIED, "orders")


def test_topic_routes_are_authorized_on_the_topic_only() -> None:
    # CreatePartitions: ALTER on the TOPIC; ALTER on the cluster does not grant it.
    check(routes.CREATE_PARTITIONS, ALICE, [topic(ALICE, "ALTER", "orders")], OK, "orders")
    check(routes.CREATE_PARTITIONS, ADMIN, [cluster(ADMIN, "ALTER")], TOPIC_DENIED, "orders")
    check(routes.DESCRIBE_TOPIC, ALICE, [topic(ALICE, "DESCRIBE", "orders")], OK, "orders")
    check(routes.DESCRIBE_TOPIC, ALICE, [], TOPIC_DENIED, "orders")


def test_a_console_group_page_needs_describe_on_that_group() -> None:
    page = routes.CONSOLE_GROUP.access
    authorizer = TableAuthorizer(frozenset({(ALICE, "DESCRIBE", GROUP, "readers")}))
    assert check_route(authorizer, ALICE, "h", page, group="readers") is None
    refusal = check_route(authorizer, ALICE, "h", page, group="writers")
    assert refusal is not None and refusal.error is Errors.GROUP_AUTHORIZATION_FAILED
    # DESCRIBE on the cluster does not open a group's offsets and members.
    admin = TableAuthorizer(frozenset({cluster(ADMIN, "DESCRIBE")}))
    refusal = check_route(admin, ADMIN, "h", page, group="readers")
    assert refusal is not None and refusal.error is Errors.GROUP_AUTHORIZATION_FAILED


def test_the_console_journal_needs_describe_configs_on_the_cluster() -> None:
    journal = routes.CONSOLE_JOURNAL
    check(journal, ADMIN, [cluster(ADMIN, "DESCRIBE_CONFIGS")], OK)
    check(journal, ALICE, [cluster(ALICE, "DESCRIBE")], CLUSTER_DENIED)


def test_configs_are_authorized_on_the_topic_or_on_the_cluster_for_brokers() -> None:
    alter = routes.ALTER_CONFIGS
    check(alter, ALICE, [topic(ALICE, "ALTER_CONFIGS", "orders")], OK, "orders")
    check(alter, ALICE, [topic(ALICE, "ALTER_CONFIGS", "orders")], CLUSTER_DENIED, None)
    check(alter, ADMIN, [cluster(ADMIN, "ALTER_CONFIGS")], OK, None)
    describe = routes.DESCRIBE_CONFIGS
    check(describe, ALICE, [topic(ALICE, "DESCRIBE_CONFIGS", "orders")], OK, "orders")
    check(describe, ALICE, [topic(ALICE, "DESCRIBE", "orders")], TOPIC_DENIED, "orders")


def test_without_an_authorizer_everything_is_allowed() -> None:
    # No authorizer.class.name: Kafka's AuthHelper.authorize returns true.
    for route in routes.ROUTES:
        assert check_route(None, ANONYMOUS, "h", route.access, topic="orders") is None


def test_the_openapi_document_and_the_listing_need_no_acl() -> None:
    check(routes.OPENAPI, ANONYMOUS, [], OK)
    check(routes.LIST_TOPICS, ANONYMOUS, [], OK)


def test_the_listing_shows_only_describable_topics() -> None:
    authorizer = TableAuthorizer(frozenset({topic(ALICE, "DESCRIBE", "b")}))
    assert describable(authorizer, ALICE, "h", ["a", "b", "c"]) == ["b"]
    assert describable(None, ALICE, "h", ["a", "b"]) == ["a", "b"]


@pytest.mark.parametrize(
    ("principal", "allow_everyone", "allowed"),
    [
        (ADMIN, False, True),  # a super user
        (ALICE, False, False),  # no ACL matches: denied by default
        (ALICE, True, True),  # allow.everyone.if.no.acl.found=true
        (ANONYMOUS, False, False),
    ],
)
def test_the_image_authorizer_without_acls(
    principal: KafkaPrincipal, allow_everyone: bool, allowed: bool
) -> None:
    # StandardAuthorizer with an empty ACL set: superUsers, then defaultResult.
    authorizer = ImageAuthorizer.of(lambda: AclsImage.EMPTY, [ADMIN], allow_everyone)
    assert authorizer.authorize(principal, "h", "DELETE", TOPIC, "orders") is allowed


def acl(name: str, operation: AclOperation, permission: AclPermissionType) -> AclBinding:
    return AclBinding(
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=PatternType.PREFIXED,
        principal="User:alice",
        host="*",
        operation=operation,
        permission_type=permission,
    )


def test_the_image_authorizer_follows_the_current_images_acls() -> None:
    images = [AclsImage.EMPTY]
    authorizer = ImageAuthorizer.of(lambda: images[-1], [ADMIN], False)
    delete = routes.DELETE_TOPIC.access
    assert check_route(authorizer, ALICE, "h", delete, topic="orders.eu") is not None
    images.append(
        AclsImage(acls=Map({"a": acl("orders.", AclOperation.DELETE, AclPermissionType.ALLOW)}))
    )
    assert check_route(authorizer, ALICE, "h", delete, topic="orders.eu") is None
    assert check_route(authorizer, ALICE, "h", delete, topic="payments") is not None
    # DELETE implies DESCRIBE (StandardAuthorizerData IMPLIES_DESCRIBE): the listing shows it.
    assert describable(authorizer, ALICE, "h", ["orders.eu", "payments"]) == ["orders.eu"]
    images.append(
        AclsImage(
            acls=Map(
                {
                    "a": acl("orders.", AclOperation.DELETE, AclPermissionType.ALLOW),
                    "b": acl("orders.eu", AclOperation.ALL, AclPermissionType.DENY),
                }
            )
        )
    )
    refused = check_route(authorizer, ALICE, "h", delete, topic="orders.eu")  # deny wins
    assert refused is not None and refused.error is TOPIC_DENIED


def test_a_broker_id_is_bound_to_its_principal_by_the_naming_rule() -> None:
    binding = BrokerBinding("User:broker-{broker_id}")
    assert binding.check(BROKER_1, 1) is None
    assert binding.check(BROKER_2, 2) is None
    refused = binding.check(BROKER_2, 1)  # broker 2 heartbeating for broker 1
    assert refused is not None
    assert refused.error is CLUSTER_DENIED
    assert "User:broker-1" in refused.message
    assert binding.check(ADMIN, 7) is not None  # a super user is no broker either
    # Without the rule, Kafka's behaviour: CLUSTER_ACTION alone decides.
    assert BrokerBinding().check(BROKER_2, 1) is None


@pytest.mark.parametrize("template", ["broker-{broker_id}", "User:broker", ""])
def test_a_bad_broker_principal_rule_is_refused(template: str) -> None:
    with pytest.raises(BrokerBindingError, match=r"pykraft\.broker\.principal"):
        BrokerBinding(template)


def test_the_config_batch_needs_alter_configs_on_the_cluster() -> None:
    # POST /v1/configs carries any resources: ALTER_CONFIGS on one topic does not grant it.
    batch = routes.ALTER_CONFIGS_BATCH
    check(batch, ADMIN, [cluster(ADMIN, "ALTER_CONFIGS")], OK, None)
    check(batch, ALICE, [topic(ALICE, "ALTER_CONFIGS", "orders")], CLUSTER_DENIED, None)
    check(batch, ALICE, [cluster(ALICE, "DESCRIBE_CONFIGS")], CLUSTER_DENIED, None)
