"""Who may use each door of the controller's HTTP API: the pure decisions (issue 11).

Why here and pure: the route table (``metadata/api/routes.py``) says, per route, which Kafka
``AclOperation`` is needed on which resource; this module turns (route access, principal,
host, resource name) into allowed or a refusal carrying Kafka's error, with no I/O, so every
rule is a one-line table test (``tests/quorum/test_auth.py``). The aiohttp side —
authenticating the caller and calling these — is ``quorum/auth_http.py``.

The ACL decision itself is an ``Authorizer`` (the shape of Kafka's ``Authorizer.authorize``,
one action at a time, operations and resource types by Kafka's names):

* None — no ``authorizer.class.name`` configured: Kafka then authorizes nothing and every
  request is allowed (``AuthHelper.authorize`` with no authorizer returns true). The default,
  as PLAINTEXT is.
* ``ImageAuthorizer`` — ``metadata/auth/authorizer.py``'s ``StandardAuthorizer`` over the ACLs
  of the controller's current metadata image, with ``super.users`` and
  ``allow.everyone.if.no.acl.found``: the same ACLs, the same rules as the brokers' listeners.

Refusals follow ``ControllerApis``: a cluster operation refused is CLUSTER_AUTHORIZATION_FAILED,
a topic operation TOPIC_AUTHORIZATION_FAILED; both are HTTP 403 (``metadata/api/errors.py``).

A broker id is bound to a principal by a naming rule, ``pykraft.broker.principal`` (e.g.
``User:CN=broker-{broker_id}``; ``BrokerBinding``): a broker RPC naming broker N (registration,
heartbeat, AlterPartition, producer ids) must come from exactly that principal, so broker 2's
certificate can neither register a fake broker 7 nor heartbeat ``want_shut_down`` for broker 1.
A rule, not "whoever registered N first" recorded in the log: it holds from the first request,
before any record exists, needs no new metadata record, and survives a controller failover
unchanged. Kafka has no such check (any CLUSTER_ACTION principal may speak for any broker id);
without the property pykraft behaves as Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

import attrs

from pykraft.metadata.api.routes import Access, ResourceOf
from pykraft.metadata.auth import authorizer as standard
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.auth.images import AclsImage
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.protocol.errors import Errors

# Kafka's ResourceType names and Resource.CLUSTER_NAME.
CLUSTER = "CLUSTER"
TOPIC = "TOPIC"
GROUP = "GROUP"
CLUSTER_NAME = "kafka-cluster"
BROKER_ID_PLACEHOLDER = "{broker_id}"


class Authorizer(Protocol):
    """Kafka's ``Authorizer.authorize`` for one action: may ``principal`` connecting from
    ``host`` perform ``operation`` (an ``AclOperation`` name) on the resource?"""

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: str,
        resource_type: str,
        resource_name: str,
    ) -> bool: ...


@attrs.define
class ImageAuthorizer:
    """Kafka's ``StandardAuthorizer`` over the ACLs ``acls()`` returns (the controller's
    current image), rebuilt only when that ACL image changes."""

    acls: Callable[[], AclsImage]
    settings: standard.AuthorizerSettings
    # Invariant: _built[1] is the authorizer of the ACL image _built[0].
    _built: tuple[AclsImage, standard.Authorizer] | None = None

    @classmethod
    def of(
        cls,
        acls: Callable[[], AclsImage],
        super_users: Iterable[KafkaPrincipal],
        allow_everyone_if_no_acl_found: bool,
    ) -> ImageAuthorizer:
        settings = standard.AuthorizerSettings(
            frozenset(str(p) for p in super_users), allow_everyone_if_no_acl_found
        )
        return cls(acls, settings)

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: str,
        resource_type: str,
        resource_name: str,
    ) -> bool:
        current = self.acls()
        if self._built is None or self._built[0] is not current:
            self._built = (current, standard.Authorizer.of(current, self.settings))
        return self._built[1].authorize(
            principal, host, AclOperation[operation], ResourceType[resource_type], resource_name
        )


@attrs.frozen
class Refusal:
    """Why a request is refused: Kafka's error and a sentence naming the principal."""

    error: Errors
    message: str


class BrokerBindingError(ValueError):
    """``pykraft.broker.principal`` is not a principal with a ``{broker_id}`` placeholder."""


@attrs.frozen
class BrokerBinding:
    """Which principal may speak for broker N: ``template`` with ``{broker_id}`` filled in,
    or (``template`` None) any principal, as in Kafka."""

    template: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.template is None:
            return
        if BROKER_ID_PLACEHOLDER not in self.template or ":" not in self.template:
            raise BrokerBindingError(
                f"pykraft.broker.principal={self.template!r}: expected a principal with a "
                f"{BROKER_ID_PLACEHOLDER} placeholder, e.g. User:CN=broker-{BROKER_ID_PLACEHOLDER}"
            )

    def principal_of(self, broker_id: int) -> KafkaPrincipal | None:
        if self.template is None:
            return None
        return KafkaPrincipal.parse(self.template.replace(BROKER_ID_PLACEHOLDER, str(broker_id)))

    def check(self, principal: KafkaPrincipal, broker_id: int) -> Refusal | None:
        expected = self.principal_of(broker_id)
        if expected is None or expected == principal:
            return None
        return Refusal(
            Errors.CLUSTER_AUTHORIZATION_FAILED,
            f"Principal {principal} may not act for broker {broker_id}; only {expected} may "
            "(pykraft.broker.principal).",
        )


def _cluster_refusal(principal: KafkaPrincipal, operation: str) -> Refusal:
    # ControllerApis' ClusterAuthorizationException message shape.
    return Refusal(
        Errors.CLUSTER_AUTHORIZATION_FAILED,
        f"Principal {principal} does not have required {operation} on the cluster.",
    )


def _topic_refusal(principal: KafkaPrincipal, operation: str, topic: str) -> Refusal:
    return Refusal(
        Errors.TOPIC_AUTHORIZATION_FAILED,
        f"Principal {principal} does not have required {operation} on topic {topic!r}.",
    )


def allowed(
    authorizer: Authorizer | None,
    principal: KafkaPrincipal,
    host: str,
    operation: str,
    resource_type: str,
    resource_name: str,
) -> bool:
    """``authorizer.authorize``, or True without an authorizer (Kafka's ``AuthHelper``)."""
    return authorizer is None or authorizer.authorize(
        principal, host, operation, resource_type, resource_name
    )


def check_cluster(
    authorizer: Authorizer | None, principal: KafkaPrincipal, host: str, operation: str
) -> Refusal | None:
    if allowed(authorizer, principal, host, operation, CLUSTER, CLUSTER_NAME):
        return None
    return _cluster_refusal(principal, operation)


def check_topic(
    authorizer: Authorizer | None,
    principal: KafkaPrincipal,
    host: str,
    access: Access,
    topic: str,
) -> Refusal | None:
    """``access.operation`` on ``topic``, or on the cluster when that grants it for every topic
    (CreateTopics and DeleteTopics: ``hasClusterAuth`` is asked first)."""
    if access.cluster_grants and allowed(
        authorizer, principal, host, access.operation, CLUSTER, CLUSTER_NAME
    ):
        return None
    if allowed(authorizer, principal, host, access.operation, TOPIC, topic):
        return None
    return _topic_refusal(principal, access.operation, topic)


def check_route(
    authorizer: Authorizer | None,
    principal: KafkaPrincipal,
    host: str,
    access: Access,
    *,
    topic: str | None = None,
    group: str | None = None,
) -> Refusal | None:
    """The check a route's access column asks for. ``topic`` is the topic of a
    TOPIC_IN_PATH / TOPIC_IN_BODY route, or of a CONFIG_IN_PATH route on a topic (None there
    means a broker's configs, authorized on the cluster)."""
    resource = access.resource
    if resource in (ResourceOf.NONE, ResourceOf.TOPICS_LISTED):
        return None  # authentication only; the listing is filtered by ``describable``
    if resource is ResourceOf.CLUSTER:
        return check_cluster(authorizer, principal, host, access.operation)
    if resource is ResourceOf.GROUP_IN_PATH:
        assert group is not None, "a group_in_path route needs its group"
        return check_group(authorizer, principal, host, access.operation, group)
    if resource is ResourceOf.CONFIG_IN_PATH and topic is None:
        return check_cluster(authorizer, principal, host, access.operation)
    assert topic is not None, f"a {resource.value} route needs its topic"
    return check_topic(authorizer, principal, host, access, topic)


def check_group(
    authorizer: Authorizer | None, principal: KafkaPrincipal, host: str, operation: str, group: str
) -> Refusal | None:
    if allowed(authorizer, principal, host, operation, GROUP, group):
        return None
    # Kafka's GroupAuthorizationException: "Not authorized to access group: <id>".
    return Refusal(
        Errors.GROUP_AUTHORIZATION_FAILED,
        f"Principal {principal} does not have required {operation} on group {group!r}.",
    )


def describable(
    authorizer: Authorizer | None, principal: KafkaPrincipal, host: str, topics: Iterable[str]
) -> list[str]:
    """The topics ``principal`` may DESCRIBE (Kafka's ``filterByAuthorized``), in order."""
    return [
        name for name in topics if allowed(authorizer, principal, host, "DESCRIBE", TOPIC, name)
    ]
