"""Who may do what through the Kafka listeners: the broker's authorizer and the API → checks table.

Kafka's broker holds one ``Authorizer`` (``authorizer.class.name``; KRaft's
``StandardAuthorizer``) fed by the metadata publisher (``AclPublisher``), and every handler of
``KafkaApis`` asks it through ``AuthHelper.authorize`` / ``filterByAuthorized`` before acting.
Here:

* ``RequestAuthorizer`` is that holder. With no authorizer configured every request is allowed
  (Kafka without ``authorizer.class.name``). With one, the pure ``metadata.auth.authorizer``
  core is rebuilt from the image's ACLs each time they change (``update``, called by
  ``broker.metadata_publisher``). Until the first image is loaded a non-super-user is refused
  with ``AuthorizerNotReadyError``: Kafka's ``StandardAuthorizerData.authorize`` throws
  ``AuthorizerNotReadyException`` before ``loadingComplete``, and as that exception has no
  entry in ``Errors`` the request is answered UNKNOWN_SERVER_ERROR (``Errors.forException``);
  ``broker.kafka_apis`` does the same.
* ``API_ACL_CHECKS`` names, for every API the broker advertises, the checks Kafka's
  ``KafkaApis`` makes (operation, resource type, the error a refusal answers). ``KafkaApis``
  refuses to register a handler for an API without an entry, so a new API cannot be served
  unchecked; the handlers make the checks (``broker/handlers``), and the table is what their
  tests hold them to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import attrs

from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.metadata.auth.authorizer import (
    SUPPORTED_OPERATIONS,
    Authorizer,
    AuthorizerSettings,
)
from pykraft.metadata.auth.images import AclsImage
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors


class AuthorizerNotReadyError(Exception):
    """Kafka's ``AuthorizerNotReadyException``: no ACLs loaded yet (UNKNOWN_SERVER_ERROR)."""


class RequestAuthorizer:
    """The broker's authorizer for handlers: ``authorize(context, operation, type, name)``."""

    def __init__(self, settings: AuthorizerSettings | None) -> None:
        # None: authorization is off (no authorizer.class.name) and everything is allowed.
        self.settings = settings
        self._acls: AclsImage | None = None
        self._authorizer: Authorizer | None = None

    @property
    def enabled(self) -> bool:
        return self.settings is not None

    @property
    def ready(self) -> bool:
        return self.settings is None or self._authorizer is not None

    def update(self, acls: AclsImage) -> bool:
        """Rebuild from the image's ACLs if they changed; True when rebuilt."""
        if self.settings is None or acls is self._acls:
            return False
        self._acls = acls
        self._authorizer = Authorizer.of(acls, self.settings)
        return True

    def authorize(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str = CLUSTER_NAME,
    ) -> bool:
        if self.settings is None:
            return True
        return self._core(context.principal).authorize(
            context.principal, context.client_host, operation, resource_type, resource_name
        )

    def authorize_cluster(self, context: RequestContext, operation: AclOperation) -> bool:
        return self.authorize(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def authorized(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
    ) -> frozenset[str]:
        """Kafka's ``AuthHelper.filterByAuthorized``: the names the principal may act on."""
        return frozenset(
            name for name in set(names) if self.authorize(context, operation, resource_type, name)
        )

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """KIP-679's ``authorizeByResourceType`` (InitProducerId without a transactional id)."""
        if self.settings is None:
            return True
        return self._core(context.principal).authorize_by_resource_type(
            context.principal, context.client_host, operation, resource_type
        )

    def authorized_operations(
        self, context: RequestContext, resource_type: ResourceType, resource_name: str
    ) -> set[int]:
        """KIP-430: the operations the principal may do on the resource, as the set of bit
        positions (operation codes) kafka-python's ``BitField`` encodes into Kafka's int32
        (``operations_bitfield`` is the same number)."""
        if self.settings is None:
            # Kafka without an authorizer: every supported operation is allowed.
            operations = SUPPORTED_OPERATIONS.get(resource_type, frozenset())
        else:
            operations = self._core(context.principal).authorized_operations(
                context.principal, context.client_host, resource_type, resource_name
            )
        return {int(operation) for operation in operations}

    def _core(self, principal: KafkaPrincipal) -> Authorizer:
        assert self.settings is not None
        if self._authorizer is not None:
            return self._authorizer
        if str(principal) in self.settings.super_users:
            # StandardAuthorizerData.authorize: super users are allowed before loading too.
            return Authorizer.of((), self.settings)
        raise AuthorizerNotReadyError("the authorizer has not loaded the ACLs yet")


ALLOW_EVERYTHING = RequestAuthorizer(None)


@attrs.frozen
class AclCheck:
    """One check Kafka's ``KafkaApis`` makes for an API, and the error a refusal answers."""

    operation: AclOperation
    resource_type: ResourceType
    error: Errors
    # When it applies / what is refused (per topic, whole request, ...).
    scope: str


def _check(operation: str, resource: str, error: Errors, scope: str) -> AclCheck:
    return AclCheck(AclOperation[operation], ResourceType[resource], error, scope)


_TOPIC_FAILED = Errors.TOPIC_AUTHORIZATION_FAILED
_GROUP_FAILED = Errors.GROUP_AUTHORIZATION_FAILED
_CLUSTER_FAILED = Errors.CLUSTER_AUTHORIZATION_FAILED
_TXN_FAILED = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

# Kafka's KafkaApis (3.7) handle* methods, API by API. An empty tuple: Kafka checks nothing.
API_ACL_CHECKS: Mapping[ApiKey, tuple[AclCheck, ...]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (
            _check(
                "WRITE",
                "TRANSACTIONAL_ID",
                Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "whole request, when it carries a transactional id",
            ),
            _check("WRITE", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        ApiKey.FETCH: (
            _check("CLUSTER_ACTION", "CLUSTER", _TOPIC_FAILED, "follower fetch: every partition"),
            _check("READ", "TOPIC", _TOPIC_FAILED, "consumer fetch: per topic"),
        ),
        ApiKey.LIST_OFFSETS: (_check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "per topic"),),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (
            _check("CLUSTER_ACTION", "CLUSTER", _TOPIC_FAILED, "follower: else per topic"),
            _check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        ApiKey.METADATA: (
            _check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "unlisted when all topics asked"),
            _check("CREATE", "CLUSTER", _TOPIC_FAILED, "auto-create: or CREATE on the topic"),
        ),
        ApiKey.FIND_COORDINATOR: (
            _check("DESCRIBE", "GROUP", _GROUP_FAILED, "per group key"),
            _check("DESCRIBE", "TRANSACTIONAL_ID", _TXN_FAILED, "per transactional id key"),
        ),
        ApiKey.JOIN_GROUP: (_check("READ", "GROUP", _GROUP_FAILED, "whole request"),),
        ApiKey.SYNC_GROUP: (_check("READ", "GROUP", _GROUP_FAILED, "whole request"),),
        ApiKey.HEARTBEAT: (_check("READ", "GROUP", _GROUP_FAILED, "whole request"),),
        ApiKey.LEAVE_GROUP: (_check("READ", "GROUP", _GROUP_FAILED, "whole request"),),
        ApiKey.OFFSET_COMMIT: (
            _check("READ", "GROUP", _GROUP_FAILED, "whole request"),
            _check("READ", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        ApiKey.OFFSET_FETCH: (
            _check("DESCRIBE", "GROUP", _GROUP_FAILED, "per group"),
            _check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "unauthorized topics left out"),
        ),
        ApiKey.DESCRIBE_GROUPS: (_check("DESCRIBE", "GROUP", _GROUP_FAILED, "per group"),),
        # KIP-848 (Kafka 3.9's KafkaApis: no topic check on either).
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (_check("READ", "GROUP", _GROUP_FAILED, "whole request"),),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (_check("DESCRIBE", "GROUP", _GROUP_FAILED, "per group"),),
        ApiKey.DELETE_GROUPS: (_check("DELETE", "GROUP", _GROUP_FAILED, "per group"),),
        ApiKey.OFFSET_DELETE: (
            _check("DELETE", "GROUP", _GROUP_FAILED, "whole request"),
            _check("READ", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        ApiKey.LIST_GROUPS: (
            _check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "all groups; else per group"),
            _check("DESCRIBE", "GROUP", _GROUP_FAILED, "groups not described are left out"),
        ),
        ApiKey.CREATE_TOPICS: (
            _check("CREATE", "CLUSTER", _TOPIC_FAILED, "or CREATE on the topic, per topic"),
        ),
        ApiKey.DELETE_TOPICS: (_check("DELETE", "TOPIC", _TOPIC_FAILED, "per topic"),),
        ApiKey.CREATE_PARTITIONS: (_check("ALTER", "TOPIC", _TOPIC_FAILED, "per topic"),),
        ApiKey.DESCRIBE_CONFIGS: (
            _check("DESCRIBE_CONFIGS", "TOPIC", _TOPIC_FAILED, "per topic resource"),
            _check("DESCRIBE_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "per broker resource"),
        ),
        ApiKey.ALTER_CONFIGS: (
            _check("ALTER_CONFIGS", "TOPIC", _TOPIC_FAILED, "per topic resource"),
            _check("ALTER_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "per broker resource"),
        ),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (
            _check("ALTER_CONFIGS", "TOPIC", _TOPIC_FAILED, "per topic resource"),
            _check("ALTER_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "per broker or logger resource"),
        ),
        ApiKey.DESCRIBE_CLUSTER: (
            _check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "KIP-430 operations only"),
        ),
        ApiKey.INIT_PRODUCER_ID: (
            _check("WRITE", "TRANSACTIONAL_ID", _TXN_FAILED, "with a transactional id"),
            _check(
                "IDEMPOTENT_WRITE",
                "CLUSTER",
                _CLUSTER_FAILED,
                "no transactional id: or WRITE on some topic (KIP-679)",
            ),
        ),
        # The ACL APIs answer SECURITY_DISABLED when no authorizer is configured (AclApis).
        ApiKey.DESCRIBE_ACLS: (_check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        ApiKey.CREATE_ACLS: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        ApiKey.DELETE_ACLS: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
            _check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
            _check("ALTER", "CLUSTER", _CLUSTER_FAILED, "per user"),
        ),
        # Transactions (KafkaApis 3.7: handleAddPartitionsToTxnRequest and the rest).
        ApiKey.ADD_PARTITIONS_TO_TXN: (
            _check("WRITE", "TRANSACTIONAL_ID", _TXN_FAILED, "v0-v3: whole transaction"),
            _check("WRITE", "TOPIC", _TOPIC_FAILED, "v0-v3: per topic, others not attempted"),
            _check("CLUSTER_ACTION", "CLUSTER", _CLUSTER_FAILED, "v4 (brokers): whole request"),
        ),
        ApiKey.ADD_OFFSETS_TO_TXN: (
            _check("WRITE", "TRANSACTIONAL_ID", _TXN_FAILED, "whole request"),
            _check("READ", "GROUP", _GROUP_FAILED, "whole request"),
        ),
        ApiKey.END_TXN: (_check("WRITE", "TRANSACTIONAL_ID", _TXN_FAILED, "whole request"),),
        ApiKey.WRITE_TXN_MARKERS: (
            _check("CLUSTER_ACTION", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        ApiKey.TXN_OFFSET_COMMIT: (
            _check("WRITE", "TRANSACTIONAL_ID", _TXN_FAILED, "whole request"),
            _check("READ", "GROUP", _GROUP_FAILED, "whole request"),
            _check("READ", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        ApiKey.DESCRIBE_PRODUCERS: (_check("READ", "TOPIC", _TOPIC_FAILED, "per topic"),),
        ApiKey.DESCRIBE_TRANSACTIONS: (
            _check("DESCRIBE", "TRANSACTIONAL_ID", _TXN_FAILED, "per transactional id"),
            _check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "undescribable topics left out"),
        ),
        ApiKey.LIST_TRANSACTIONS: (
            _check("DESCRIBE", "TRANSACTIONAL_ID", _TXN_FAILED, "ids not described left out"),
        ),
        # ControllerApis.handleElectLeaders: authorizeClusterOperation(ALTER).
        ApiKey.ELECT_LEADERS: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        # ControllerApis.handleDescribeQuorum: authorizeClusterOperation(DESCRIBE).
        ApiKey.DESCRIBE_QUORUM: (_check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        # KIP-455 (ControllerApis.handleAlter/ListPartitionReassignments).
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
            _check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (
            _check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        # KafkaApis.handleDeleteRecordsRequest / handleDescribeLogDirsRequest.
        ApiKey.DELETE_RECORDS: (_check("DELETE", "TOPIC", _TOPIC_FAILED, "per topic"),),
        ApiKey.DESCRIBE_LOG_DIRS: (
            _check("DESCRIBE", "CLUSTER", _CLUSTER_FAILED, "whole request: no results"),
        ),
        # KafkaApis.handleAlterReplicaLogDirsRequest: every partition answers the error.
        ApiKey.ALTER_REPLICA_LOG_DIRS: (
            _check("ALTER", "CLUSTER", _CLUSTER_FAILED, "every partition"),
        ),
        # Client quotas (KIP-546): KafkaApis.handleDescribeClientQuotasRequest and
        # ControllerApis.handleAlterClientQuotas.
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (
            _check("DESCRIBE_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        ApiKey.ALTER_CLIENT_QUOTAS: (
            _check("ALTER_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "every entity"),
        ),
        # ControllerApis.handleUnregisterBroker / handleUpdateFeatures: authorizeClusterOperation.
        ApiKey.UNREGISTER_BROKER: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        # KIP-853: ControllerApis.handleAddRaftVoter / handleRemoveRaftVoter,
        # authorizeClusterOperation(ALTER).
        ApiKey.ADD_RAFT_VOTER: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        ApiKey.REMOVE_RAFT_VOTER: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        ApiKey.UPDATE_FEATURES: (_check("ALTER", "CLUSTER", _CLUSTER_FAILED, "whole request"),),
        # handleListClientMetricsResources: authorizeClusterOperation.
        ApiKey.LIST_CONFIG_RESOURCES: (
            _check("DESCRIBE_CONFIGS", "CLUSTER", _CLUSTER_FAILED, "whole request"),
        ),
        # DescribeTopicPartitionsRequestHandler: unauthorized topics left out when all are asked.
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (
            _check("DESCRIBE", "TOPIC", _TOPIC_FAILED, "per topic"),
        ),
        # KIP-48 (ControllerApis.handleCreateDelegationTokenRequest; KafkaApis.
        # handleDescribeTokensRequest with DelegationTokenManager.filterToken). Renew and Expire
        # check only who owns or renews the token, in the controller.
        ApiKey.CREATE_DELEGATION_TOKEN: (
            _check(
                "CREATE_TOKENS",
                "USER",
                Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                "for another owner (KIP-373)",
            ),
        ),
        ApiKey.RENEW_DELEGATION_TOKEN: (),
        ApiKey.EXPIRE_DELEGATION_TOKEN: (),
        ApiKey.DESCRIBE_DELEGATION_TOKEN: (
            _check(
                "DESCRIBE",
                "DELEGATION_TOKEN",
                Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                "tokens not owned, renewed or described are left out",
            ),
            _check(
                "DESCRIBE_TOKENS",
                "USER",
                Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                "or DESCRIBE_TOKENS on the token's owner",
            ),
        ),
        # Kafka checks nothing for these: they come before or without authentication.
        ApiKey.API_VERSIONS: (),
        ApiKey.SASL_HANDSHAKE: (),
        ApiKey.SASL_AUTHENTICATE: (),
    }
)
