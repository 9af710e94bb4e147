"""The operators' and the admin handlers' calls to the controller: topics, configs, the cluster
and its brokers, ACLs and SCRAM credentials (KIP-554).

Why a module of its own: these are the calls ``pykraft topics`` / ``acls`` / ``user-scram``
and the broker's forwarded Kafka admin APIs make (``controller_api.py``'s
``ControllerClient`` protocol), each a route of ``metadata/api/topics.py``, ``admin.py``,
``reassignments.py`` (KIP-455) or ``security.py``; a broker's calls about itself are in
``controller_broker_rpcs.py``, and the transport both share in ``controller_transport.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pykraft.broker.controller_transport import ControllerTransport
from pykraft.metadata.api import (
    admin,
    client_quotas,
    config_batch,
    delegation_tokens,
    features,
    quorum,
    reassignments,
    routes,
    security,
    topics,
    voters,
)
from pykraft.metadata.api.topics import TopicDescription, TopicListing
from pykraft.metadata.auth.acl import AclBinding, AclBindingFilter

# How much longer than a voter change's own timeout the broker waits for the controller's answer.
VOTER_CHANGE_SLACK_S = 5.0


class AdminCalls(ControllerTransport):
    """The admin, ACL and SCRAM routes, one method each (``ControllerClient`` has them all)."""

    async def create_topic(
        self, topic: topics.CreatableTopic, *, validate_only: bool
    ) -> topics.CreatableTopicResult:
        request = topics.CreateTopicsRequest(topics=(topic,), validate_only=validate_only)
        # Resent only when it writes nothing: a second create would answer TOPIC_ALREADY_EXISTS.
        return await self._write_route(
            routes.CREATE_TOPIC,
            topics.create_topic_request_to_json(request),
            topics.created_topic_from_json,
            idempotent=validate_only,
        )

    async def delete_topic(self, name: str) -> topics.DeletableTopicResult:
        route = routes.DELETE_TOPIC
        return await self._write(route, route.path(name=name), None, topics.deleted_topic_from_json)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> None:
        request = topics.CreatePartitionsRequest(
            topics=(
                topics.CreatePartitionsTopic(
                    name=name,
                    count=count,
                    assignments=None
                    if assignments is None
                    else tuple(tuple(a) for a in assignments),
                ),
            ),
            validate_only=validate_only,
        )
        route = routes.CREATE_PARTITIONS
        await self._write(
            route,
            route.path(name=name),
            topics.create_partitions_request_to_json(request),
            topics.partition_count_from_json,
            idempotent=validate_only,
        )

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        route = routes.DESCRIBE_CONFIGS
        answer = await self._read(
            route,
            route.path(
                resource_type=resource_type,
                resource_name=admin.config_name_to_path(
                    admin.config_resource_from_path(resource_type).value, resource_name
                ),
            ),
            admin.configs_from_json,
        )
        return answer.configs

    async def alter_configs(
        self,
        resource_type: str,
        resource_name: str,
        *,
        set_configs: Mapping[str, str],
        delete: Sequence[str] = (),
        validate_only: bool = False,
    ) -> Mapping[str, str]:
        changes = [
            admin.AlterableConfig(k, admin.AlterConfigOp.SET, v) for k, v in set_configs.items()
        ]
        changes += [admin.AlterableConfig(k, admin.AlterConfigOp.DELETE) for k in delete]
        kind = admin.config_resource_from_path(resource_type)
        request = admin.IncrementalAlterConfigsRequest(
            resources=(admin.AlterConfigsResource(kind.value, resource_name, tuple(changes)),),
            validate_only=validate_only,
        )
        route = routes.ALTER_CONFIGS
        answer = await self._write(
            route,
            route.path(
                resource_type=resource_type,
                resource_name=admin.config_name_to_path(kind.value, resource_name),
            ),
            admin.alter_configs_request_to_json(request),
            admin.configs_from_json,
        )
        return answer.configs

    async def alter_configs_batch(
        self, request: admin.AlterConfigsRequest
    ) -> admin.IncrementalAlterConfigsResponse:
        """POST /v1/configs: every resource of one forwarded (Incremental)AlterConfigs."""
        route = routes.ALTER_CONFIGS_BATCH
        return await self._write(
            route,
            route.path(),
            config_batch.alter_configs_batch_to_json(request),
            config_batch.alter_configs_results_from_json,
        )

    async def elect_leaders(self, request: admin.ElectLeadersRequest) -> admin.ElectLeadersResponse:
        """POST /v1/elections (Kafka's ElectLeaders, KIP-460); a refused request (an unknown
        election type) raises ``ControllerError``. Resent after a lost answer, an election that
        happened answers ELECTION_NOT_NEEDED for its partitions, as Kafka's retries do."""
        return await self._write_route(
            routes.ELECT_LEADERS,
            admin.elect_leaders_request_to_json(request),
            admin.elect_leaders_response_from_json,
        )

    async def update_features(
        self, request: features.UpdateFeaturesRequest
    ) -> features.UpdateFeaturesResponse:
        """POST /v1/features (Kafka's UpdateFeatures, KIP-584): one result per feature."""
        route = routes.UPDATE_FEATURES
        return await self._write(
            route,
            route.path(),
            features.update_features_request_to_json(request),
            features.update_features_response_from_json,
        )

    async def describe_quorum(self) -> quorum.DescribeQuorumResponse:
        """GET /v1/quorum/describe: Kafka's DescribeQuorum, from the active controller (a
        standby's 421 NOT_CONTROLLER is followed like a write's)."""
        return await self._read_route(routes.DESCRIBE_QUORUM, quorum.describe_quorum_from_json)

    async def add_raft_voter(self, request: voters.AddVoterRequest) -> None:
        """POST /v1/quorum/voters/add (KIP-853): answers once the voter is added and caught up;
        the HTTP wait covers the request's own ``timeout_ms``. Not resent."""
        route = routes.ADD_RAFT_VOTER
        await self._call(
            route,
            route.path(),
            body=voters.add_voter_to_json(request),
            timeout_s=request.timeout_ms / 1000 + VOTER_CHANGE_SLACK_S,
        )
        self._remember_leader()

    async def remove_raft_voter(self, request: voters.RemoveVoterRequest) -> None:
        """POST /v1/quorum/voters/remove (KIP-853). Not resent."""
        route = routes.REMOVE_RAFT_VOTER
        await self._call(route, route.path(), body=voters.remove_voter_to_json(request))
        self._remember_leader()

    async def list_topics(self) -> tuple[TopicListing, ...]:
        return await self._read_route(routes.LIST_TOPICS, topics.topic_listings_from_json)

    async def describe_topic(self, name: str) -> TopicDescription:
        route = routes.DESCRIBE_TOPIC
        return await self._read(route, route.path(name=name), topics.topic_description_from_json)

    async def cluster(self) -> admin.ClusterDescription:
        """GET /v1/cluster: controller id, controllers, metadata offset, counts."""
        return await self._read_route(routes.CLUSTER, admin.cluster_from_json)

    async def list_brokers(self) -> tuple[admin.BrokerDescription, ...]:
        return await self._read_route(routes.LIST_BROKERS, admin.brokers_from_json)

    # ------------------------------------------------------------------ reassignments (KIP-455)

    async def alter_partition_reassignments(
        self, request: reassignments.AlterPartitionReassignmentsRequest
    ) -> reassignments.AlterPartitionReassignmentsResponse:
        return await self._write_route(
            routes.ALTER_PARTITION_REASSIGNMENTS,
            reassignments.alter_reassignments_request_to_json(request),
            reassignments.alter_reassignments_response_from_json,
        )

    async def list_partition_reassignments(
        self,
    ) -> reassignments.ListPartitionReassignmentsResponse:
        """Every reassignment in progress; callers select (``select_reassignments``)."""
        return await self._read_route(
            routes.LIST_PARTITION_REASSIGNMENTS, reassignments.list_reassignments_response_from_json
        )

    # ------------------------------------------------------------------ ACLs, SCRAM (KIP-554)

    async def create_acls(self, creations: Sequence[AclBinding]) -> security.CreateAclsResponse:
        request = security.CreateAclsRequest(tuple(creations))
        body = security.create_acls_request_to_json(request)
        return await self._write_route(
            routes.CREATE_ACLS, body, security.create_acls_response_from_json
        )

    async def describe_acls(self, acl_filter: AclBindingFilter) -> tuple[AclBinding, ...]:
        params = security.acl_filter_to_query(acl_filter)
        answer = await self._read_route(
            routes.DESCRIBE_ACLS, security.describe_acls_response_from_json, params=params
        )
        return answer.acls

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> security.DeleteAclsResponse:
        body = security.delete_acls_request_to_json(security.DeleteAclsRequest(tuple(filters)))
        return await self._write_route(
            routes.DELETE_ACLS, body, security.delete_acls_response_from_json
        )

    async def alter_user_scram_credentials(
        self, request: security.AlterUserScramCredentialsRequest
    ) -> security.AlterUserScramCredentialsResponse:
        body = security.alter_scram_request_to_json(request)
        return await self._write_route(
            routes.ALTER_SCRAM_CREDENTIALS, body, security.alter_scram_response_from_json
        )

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> security.DescribeUserScramCredentialsResponse:
        """``None``: every user with a credential."""
        params = [("user", user) for user in users or ()]
        return await self._read_route(
            routes.DESCRIBE_SCRAM_CREDENTIALS,
            security.describe_scram_response_from_json,
            params=params,
        )

    # ------------------------------------------------------------------ delegation tokens (KIP-48)

    async def create_delegation_token(
        self, request: delegation_tokens.CreateDelegationTokenRequest
    ) -> delegation_tokens.CreateDelegationTokenResponse:
        return await self._write_route(
            routes.CREATE_DELEGATION_TOKEN,
            delegation_tokens.create_request_to_json(request),
            delegation_tokens.create_response_from_json,
        )

    async def renew_delegation_token(
        self, request: delegation_tokens.RenewDelegationTokenRequest
    ) -> delegation_tokens.DelegationTokenExpiryResponse:
        return await self._write_route(
            routes.RENEW_DELEGATION_TOKEN,
            delegation_tokens.renew_request_to_json(request),
            delegation_tokens.expiry_response_from_json,
        )

    async def expire_delegation_token(
        self, request: delegation_tokens.ExpireDelegationTokenRequest
    ) -> delegation_tokens.DelegationTokenExpiryResponse:
        return await self._write_route(
            routes.EXPIRE_DELEGATION_TOKEN,
            delegation_tokens.expire_request_to_json(request),
            delegation_tokens.expiry_response_from_json,
        )

    # ------------------------------------------------------------------ client quotas (KIP-546)

    async def alter_client_quotas(
        self, request: client_quotas.AlterClientQuotasRequest
    ) -> client_quotas.AlterClientQuotasResponse:
        body = client_quotas.alter_client_quotas_request_to_json(request)
        return await self._write_route(
            routes.ALTER_CLIENT_QUOTAS, body, client_quotas.alter_client_quotas_response_from_json
        )

    async def describe_client_quotas(
        self, request: client_quotas.DescribeClientQuotasRequest
    ) -> client_quotas.DescribeClientQuotasResponse:
        body = client_quotas.describe_client_quotas_request_to_json(request)
        return await self._write_route(
            routes.DESCRIBE_CLIENT_QUOTAS,
            body,
            client_quotas.describe_client_quotas_response_from_json,
        )
