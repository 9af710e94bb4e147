"""What the broker needs from the active controller: its failures and the admin calls.

Everything in the broker that talks to the controller — the admin and group handlers, the
metadata loader, heartbeats, producer-id blocks, ``controller_client.py`` which implements it
all over HTTP, and ``pykraft topics`` — raises and catches ``ControllerError``; the handlers are
given a ``ControllerClient`` typed by the protocol below, named after the controller's routes,
whose values are the controller's contract (``metadata/api/topics.py``: ``CreatableTopic``, the
CreateTopics entry a handler forwards as it is, and the results).

Kafka brokers forward CreateTopics, DeleteTopics and CreatePartitions to the active controller
(KIP-590 forwarding); pykraft's controller serves them over HTTP (``quorum/service_admin.py``):

  create_topic        POST   /v1/topics
  delete_topic        DELETE /v1/topics/{name}
  create_partitions   POST   /v1/topics/{name}/partitions
  describe_configs    GET    /v1/configs/{topic|broker}/{name}
  elect_leaders       POST   /v1/elections
  describe_quorum     GET    /v1/quorum/describe
  add_raft_voter      POST   /v1/quorum/voters/add    (KIP-853)
  remove_raft_voter   POST   /v1/quorum/voters/remove (KIP-853)
  update_features     POST   /v1/features           (KIP-584)
  unregister_broker   DELETE /v1/brokers/{broker_id} (KIP-631; a broker RPC's route too)
  alter_partition_reassignments   POST   /v1/reassignments   (KIP-455)
  list_partition_reassignments    GET    /v1/reassignments

and ACLs and SCRAM credentials (the Kafka CreateAcls, DescribeAcls, DeleteAcls,
AlterUserScramCredentials and DescribeUserScramCredentials APIs; ``quorum/service_security.py``):

  create_acls                       POST   /v1/acls
  describe_acls                     GET    /v1/acls?<filter>
  delete_acls                       DELETE /v1/acls
  alter_user_scram_credentials      POST   /v1/scram-credentials
  describe_user_scram_credentials   GET    /v1/scram-credentials?user=...

and client quotas (Kafka's AlterClientQuotas, KIP-546; DescribeClientQuotas is answered from the
broker's image): ``alter_client_quotas``  POST /v1/client-quotas

An implementation (aiohttp, written elsewhere) follows NOT_CONTROLLER redirects itself and
raises ``ControllerError`` for every failure — a rejected request (the controller's ``error``
field is a Kafka error name, e.g. TOPIC_ALREADY_EXISTS) as well as an unreachable controller
(REQUEST_TIMED_OUT, or NOT_CONTROLLER when no leader is known). The handlers map the name back to
Kafka's error code; nothing else may escape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from pykraft.metadata.api.admin import (
    AlterConfigsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsResponse,
)
from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from pykraft.metadata.api.delegation_tokens import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DelegationTokenExpiryResponse,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.features import UpdateFeaturesRequest, UpdateFeaturesResponse
from pykraft.metadata.api.quorum import DescribeQuorumResponse
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
)
from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeUserScramCredentialsResponse,
)
from pykraft.metadata.api.topics import CreatableTopic, CreatableTopicResult, DeletableTopicResult
from pykraft.metadata.api.voters import AddVoterRequest, RemoveVoterRequest
from pykraft.metadata.auth.acl import AclBinding, AclBindingFilter
from pykraft.protocol.errors import Errors


class ControllerError(Exception):
    """The controller refused the request, or could not be reached."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message

    @property
    def code(self) -> Errors:
        """The Kafka error code named by ``error`` (UNKNOWN_SERVER_ERROR for other names)."""
        return Errors.__members__.get(self.error, Errors.UNKNOWN_SERVER_ERROR)


class ControllerClient(Protocol):
    async def create_topic(
        self, topic: CreatableTopic, *, validate_only: bool
    ) -> CreatableTopicResult: ...

    async def delete_topic(self, name: str) -> DeletableTopicResult: ...

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> None: ...

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        """``resource_type`` is "topic" or "broker"; every config with its effective value."""
        ...

    async def alter_configs_batch(
        self, request: AlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse:
        """Every resource of one IncrementalAlterConfigs, or AlterConfigs
        (``LegacyAlterConfigsRequest``), in one controller call (one Raft entry): a result per
        resource, in order; ControllerError if the call as a whole failed."""
        ...

    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse:
        """PREFERRED or UNCLEAN elections (KIP-460): one result per requested partition (for
        every partition: those an election did not skip); ControllerError for a refused
        request."""
        ...

    async def describe_quorum(self) -> DescribeQuorumResponse:
        """The metadata quorum as the active controller's Raft state describes it."""
        ...

    async def add_raft_voter(self, request: AddVoterRequest) -> None:
        """Add a controller to the voters once it is caught up (KIP-853); ControllerError with
        Kafka's error (DUPLICATE_VOTER, REQUEST_TIMED_OUT, ...) when refused."""
        ...

    async def remove_raft_voter(self, request: RemoveVoterRequest) -> None:
        """Remove a controller from the voters (KIP-853); ControllerError VOTER_NOT_FOUND, ..."""
        ...

    async def update_features(self, request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
        """One result per named feature (INVALID_UPDATE_VERSION for a refused level)."""
        ...

    async def unregister_broker(self, broker_id: int) -> None:
        """Remove a broker's registration; ControllerError BROKER_ID_NOT_REGISTERED for an id
        with none."""
        ...

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        """One result per partition (KIP-455); a null target cancels."""
        ...

    async def list_partition_reassignments(self) -> ListPartitionReassignmentsResponse:
        """Every reassignment in progress."""
        ...

    async def create_acls(self, creations: Sequence[AclBinding]) -> CreateAclsResponse:
        """One result per creation, in order (INVALID_REQUEST for an invalid ACL)."""
        ...

    async def describe_acls(self, acl_filter: AclBindingFilter) -> tuple[AclBinding, ...]:
        """The ACLs the filter matches; ControllerError INVALID_REQUEST for a bad filter."""
        ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> DeleteAclsResponse: ...

    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse: ...

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> DescribeUserScramCredentialsResponse: ...

    async def create_delegation_token(
        self, request: CreateDelegationTokenRequest
    ) -> CreateDelegationTokenResponse:
        """KIP-48: the controller creates the token (``quorum.managers.delegation_tokens``)."""
        ...

    async def renew_delegation_token(
        self, request: RenewDelegationTokenRequest
    ) -> DelegationTokenExpiryResponse: ...

    async def expire_delegation_token(
        self, request: ExpireDelegationTokenRequest
    ) -> DelegationTokenExpiryResponse: ...

    async def alter_client_quotas(
        self, request: AlterClientQuotasRequest
    ) -> AlterClientQuotasResponse:
        """KIP-546: one result per distinct entity (``quorum.managers.client_quotas``)."""
        ...
