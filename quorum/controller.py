"""QuorumController: the active controller's decisions, as pure functions of the image.

Theory of operation. The controller never owns the metadata image and never does I/O: every
entry point takes the current committed ``MetadataImage``, a request and ``now_ms``, and returns
a ``ControllerResult(records, response)``. The records are one atomic batch to propose to the
Raft log; the response is to be sent once that batch commits (or at once when there are no
records). A request that fails validation returns its error and no records. Randomness (topic
ids, the placement start) comes from the ``RandomSource`` given at construction — a seeded
``random.Random`` in tests and simulations.

The only state kept here is soft state of the active controller, never written to the log
(KIP-631): broker sessions (last heartbeat, reported metadata offset, controlled-shutdown
offset) and the time of the last write. A new active controller makes a new ``QuorumController``
after failover: every broker then gets a full ``broker.session.timeout.ms`` of grace.

Contract with the Raft shell (quorum/service.py):

* Compute against the latest committed image and propose with ``expected_last_offset =
  image.offset``. Two results computed from the same image may conflict (both registering
  offset ``image.offset + 1``, both creating one topic): propose one, wait for it to commit (or
  be rejected), then compute the next against the new image. Broker epochs depend on this: a
  registration's epoch is the offset its ``RegisterBrokerRecord`` gets,
  ``image.offset + 1 + its index in the batch``.
* Call ``fence_stale_brokers(image, now_ms)``, ``maybe_noop(image, now_ms)`` and
  ``maybe_balance_partition_leaders(image, now_ms)`` from the timer; ``next_deadline_ms(image)``
  says when next to call them. Each fencing batch covers one broker, so call again after it
  commits while it returns records. Leader balancing (``auto.leader.rebalance.enable``,
  ``managers/leader_balance.py``) is scheduled after every write, as Kafka's QuorumController
  schedules it after every write event, and runs a bounded number of PREFERRED elections.

API (requests and responses are attrs frozen classes, re-exported here):

    QuorumController(*, rng: RandomSource, now_ms: int,
                     settings: ControllerSettings = ControllerSettings())
    handle(image, request, now_ms) -> ControllerResult[response]   # dispatch on request type
    register_broker(image, BrokerRegistrationRequest, now_ms)
        -> ControllerResult[BrokerRegistrationResponse(error, broker_epoch)]
    broker_heartbeat(image, BrokerHeartbeatRequest, now_ms)
        -> ControllerResult[BrokerHeartbeatResponse(error, is_caught_up, is_fenced,
                                                    in_controlled_shutdown, should_shut_down)]
        # offline_log_dirs / offline_replicas (KIP-858) move leadership off failed log dirs
    unregister_broker(image, UnregisterBrokerRequest, now_ms)
        -> ControllerResult[UnregisterBrokerResponse(error)]
    create_topics(image, CreateTopicsRequest, now_ms) -> ControllerResult[CreateTopicsResponse]
    delete_topics(image, DeleteTopicsRequest, now_ms) -> ControllerResult[DeleteTopicsResponse]
    create_partitions(image, CreatePartitionsRequest, now_ms)
        -> ControllerResult[CreatePartitionsResponse]
    alter_partition(image, AlterPartitionRequest, now_ms)
        -> ControllerResult[AlterPartitionResponse]
    elect_leaders(image, ElectLeadersRequest, now_ms) -> ControllerResult[ElectLeadersResponse]
    alter_partition_reassignments(image, AlterPartitionReassignmentsRequest, now_ms)
        -> ControllerResult[AlterPartitionReassignmentsResponse]   # KIP-455
        # ListPartitionReassignments reads the committed image
        # (quorum.managers.reassignment.list_partition_reassignments)
    incremental_alter_configs(image, IncrementalAlterConfigsRequest, now_ms)
        -> ControllerResult[IncrementalAlterConfigsResponse]
    legacy_alter_configs(image, LegacyAlterConfigsRequest, now_ms)   # AlterConfigs
        -> ControllerResult[IncrementalAlterConfigsResponse]
    allocate_producer_ids(image, AllocateProducerIdsRequest, now_ms)
        -> ControllerResult[AllocateProducerIdsResponse(error, producer_id_start,
                                                        producer_id_len)]
    create_acls(image, CreateAclsRequest, now_ms) -> ControllerResult[CreateAclsResponse]
    delete_acls(image, DeleteAclsRequest, now_ms) -> ControllerResult[DeleteAclsResponse]
    alter_user_scram_credentials(image, AlterUserScramCredentialsRequest, now_ms)
        -> ControllerResult[AlterUserScramCredentialsResponse]
    alter_client_quotas(image, AlterClientQuotasRequest, now_ms)
        -> ControllerResult[AlterClientQuotasResponse]     # KIP-546
    update_features(image, UpdateFeaturesRequest, now_ms)
        -> ControllerResult[UpdateFeaturesResponse]        # KIP-584 (managers/features.py)
    delegation_token(image, Create/Renew/ExpireDelegationTokenRequest, now_ms, wall_clock_ms)
        -> ControllerResult[CreateDelegationTokenResponse | DelegationTokenExpiryResponse]
        # KIP-48 (managers/delegation_tokens.py); Describe reads the committed image
    maybe_sweep_expired_delegation_tokens(image, now_ms, wall_clock_ms)
        -> ControllerResult[int] | None
        # DescribeAcls / DescribeUserScramCredentials read the committed image
        # (quorum.managers.acls.describe_acls, quorum.managers.scram.describe_...)
    fence_stale_brokers(image, now_ms) -> ControllerResult[tuple[int, ...]]  # fenced ids
    maybe_noop(image, now_ms) -> ControllerResult[None] | None               # NoOpRecord
    maybe_balance_partition_leaders(image, now_ms) -> ControllerResult[bool] | None
        # None: not due; the response: partitions were left for a run soon after
    next_deadline_ms(image) -> int

Errors are ``metadata.api.errors.ApiError(error: Errors, message)`` with Kafka's codes and names.
The request and response types are the controller's HTTP contract (``metadata/api``), defined
there once so that the brokers that send them can import them too.
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypeVar

from pykraft.metadata.api.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    LegacyAlterConfigsRequest,
    PartitionResult,
    ReplicaElectionResult,
    TopicPartitions,
)
from pykraft.metadata.api.brokers import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerState,
    OfflineReplica,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from pykraft.metadata.api.delegation_tokens import (
    CreateDelegationTokenRequest,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.features import UpdateFeaturesRequest, UpdateFeaturesResponse
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from pykraft.metadata.api.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import NoOpRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers import (
    acls,
    client_quotas,
    cluster,
    configs,
    delegation_tokens,
    elr,
    features,
    leader_balance,
    leadership,
    producer_ids,
    reassignment,
    replication,
    scram,
)
from pykraft.quorum.managers.delegation_tokens import DelegationTokenRequest
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.managers.sessions import BrokerSessions
from pykraft.quorum.managers.settings import ControllerSettings
from pykraft.quorum.placement import RandomSource

__all__ = [
    "SUCCESS",
    "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse",
    "AlterConfigOp",
    "AlterConfigsResource",
    "AlterConfigsResourceResult",
    "AlterPartitionData",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "AlterPartitionRequest",
    "AlterPartitionResponse",
    "AlterPartitionResult",
    "AlterableConfig",
    "ApiError",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "BrokerState",
    "ControllerRequest",
    "ControllerResult",
    "ControllerSettings",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicResult",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "ElectionType",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "LegacyAlterConfigsRequest",
    "OfflineReplica",
    "PartitionResult",
    "QuorumController",
    "RandomSource",
    "ReplicaElectionResult",
    "TopicPartitions",
    "UnregisterBrokerRequest",
    "UnregisterBrokerResponse",
]

ControllerRequest: TypeAlias = (
    BrokerRegistrationRequest
    | BrokerHeartbeatRequest
    | UnregisterBrokerRequest
    | CreateTopicsRequest
    | DeleteTopicsRequest
    | CreatePartitionsRequest
    | AlterPartitionRequest
    | ElectLeadersRequest
    | AlterPartitionReassignmentsRequest
    | IncrementalAlterConfigsRequest
    | LegacyAlterConfigsRequest
    | AllocateProducerIdsRequest
    | CreateAclsRequest
    | DeleteAclsRequest
    | AlterUserScramCredentialsRequest
    | AlterClientQuotasRequest
    | UpdateFeaturesRequest
    | CreateDelegationTokenRequest
    | RenewDelegationTokenRequest
    | ExpireDelegationTokenRequest
)

R = TypeVar("R")


class QuorumController:
    """The active controller's logic; see the module docstring for the contract."""

    def __init__(
        self, *, rng: RandomSource, now_ms: int, settings: ControllerSettings | None = None
    ) -> None:
        self.settings = settings if settings is not None else ControllerSettings()
        self._rng = rng
        self.sessions = BrokerSessions(
            self.settings.broker_session_timeout_ms,
            now_ms,
            self.settings.broker_channel_closed_timeout_ms,
            self.settings.broker_exited_grace_ms,
        )
        self._last_write_ms = now_ms
        self._next_token_sweep_ms = now_ms + self.settings.delegation_token_expiry_check_interval_ms
        self.leader_balance = leader_balance.LeaderBalanceSchedule(
            self.settings.leader_imbalance_check_interval_ms
            if self.settings.auto_leader_rebalance_enable
            else None
        )

    def _unclean(self, image: MetadataImage) -> elr.ElectionPolicy:
        """unclean.leader.election.enable per topic, and KIP-966 ELR when the feature is on."""
        return elr.election_policy(
            image, self.settings.unclean_leader_election_enable, self.settings.min_insync_replicas
        )

    def _wrote(self, result: ControllerResult[R], now_ms: int) -> ControllerResult[R]:
        """Every write event ends here (with records or without)."""
        if result.records:
            self._last_write_ms = max(self._last_write_ms, now_ms)
        self.leader_balance.on_write(now_ms)
        return result

    def handle(
        self,
        image: MetadataImage,
        request: ControllerRequest,
        now_ms: int,
        *,
        wall_clock_ms: int | None = None,
    ) -> ControllerResult[Any]:
        """Dispatch ``request`` to its entry point. A delegation-token request needs
        ``wall_clock_ms`` (its timestamps are Unix times, ``now_ms`` is monotonic): without it
        the request is refused with TypeError, so no caller dates a token by the wrong clock."""
        match request:
            case BrokerRegistrationRequest():
                return self.register_broker(image, request, now_ms)
            case BrokerHeartbeatRequest():
                return self.broker_heartbeat(image, request, now_ms)
            case UnregisterBrokerRequest():
                return self.unregister_broker(image, request, now_ms)
            case CreateTopicsRequest():
                return self.create_topics(image, request, now_ms)
            case DeleteTopicsRequest():
                return self.delete_topics(image, request, now_ms)
            case CreatePartitionsRequest():
                return self.create_partitions(image, request, now_ms)
            case AlterPartitionRequest():
                return self.alter_partition(image, request, now_ms)
            case ElectLeadersRequest():
                return self.elect_leaders(image, request, now_ms)
            case AlterPartitionReassignmentsRequest():
                return self.alter_partition_reassignments(image, request, now_ms)
            case IncrementalAlterConfigsRequest():
                return self.incremental_alter_configs(image, request, now_ms)
            case LegacyAlterConfigsRequest():
                return self.legacy_alter_configs(image, request, now_ms)
            case AllocateProducerIdsRequest():
                return self.allocate_producer_ids(image, request, now_ms)
            case CreateAclsRequest():
                return self.create_acls(image, request, now_ms)
            case DeleteAclsRequest():
                return self.delete_acls(image, request, now_ms)
            case AlterUserScramCredentialsRequest():
                return self.alter_user_scram_credentials(image, request, now_ms)
            case AlterClientQuotasRequest():
                return self.alter_client_quotas(image, request, now_ms)
            case UpdateFeaturesRequest():
                return self.update_features(image, request, now_ms)
            case (
                CreateDelegationTokenRequest()
                | RenewDelegationTokenRequest()
                | ExpireDelegationTokenRequest()
            ):
                if wall_clock_ms is None:
                    name = type(request).__name__
                    raise TypeError(f"{name} needs wall_clock_ms: token timestamps are Unix times")
                return self.delegation_token(image, request, now_ms, wall_clock_ms)
        raise TypeError(f"not a controller request: {type(request).__name__}")

    def register_broker(
        self, image: MetadataImage, request: BrokerRegistrationRequest, now_ms: int
    ) -> ControllerResult[BrokerRegistrationResponse]:
        return self._wrote(
            cluster.register_broker(image, request, self.sessions, now_ms, self._unclean(image)),
            now_ms,
        )

    def broker_heartbeat(
        self,
        image: MetadataImage,
        request: BrokerHeartbeatRequest,
        now_ms: int,
        received_ms: int | None = None,
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        """``received_ms``: when it arrived (``broker_heartbeat_arrived``), if before ``now_ms``."""
        return self._wrote(
            cluster.broker_heartbeat(
                image,
                request,
                self.sessions,
                now_ms,
                self._unclean(image),
                now_ms if received_ms is None else received_ms,
            ),
            now_ms,
        )

    def broker_heartbeat_arrived(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int
    ) -> None:
        """Its heartbeat arrived: contact from now, before ``broker_heartbeat`` (soft state)."""
        self.sessions.heard_from(image, broker_id, broker_epoch, now_ms)

    def broker_channel_opened(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int
    ) -> None:
        """A metadata long poll of this broker incarnation arrived (soft state only)."""
        self.sessions.channel_opened(image, broker_id, broker_epoch, now_ms)

    def broker_channel_closed(
        self,
        image: MetadataImage,
        broker_id: int,
        broker_epoch: int,
        seen_ms: int,
        *,
        suspect: bool = True,
        poll_closed: bool = False,
        heartbeat_closed: bool = False,
    ) -> None:
        """Its connections were seen closed at ``seen_ms`` (not counted if it called in since):
        if one closed as only a dead process closes it (``suspect``) and it does not call in
        again within ``pykraft.broker.channel.closed.timeout.ms``, or both closed (its process
        exited) and it does not within ``pykraft.broker.exited.grace.ms``, its session ends
        (``managers/sessions.py``), and ``fence_stale_brokers`` fences it."""
        self.sessions.channel_closed(
            image,
            broker_id,
            broker_epoch,
            seen_ms,
            suspect=suspect,
            poll_closed=poll_closed,
            heartbeat_closed=heartbeat_closed,
        )

    def unregister_broker(
        self, image: MetadataImage, request: UnregisterBrokerRequest, now_ms: int
    ) -> ControllerResult[UnregisterBrokerResponse]:
        return self._wrote(
            cluster.unregister_broker(image, request, self.sessions, self._unclean(image)), now_ms
        )

    def create_topics(
        self, image: MetadataImage, request: CreateTopicsRequest, now_ms: int
    ) -> ControllerResult[CreateTopicsResponse]:
        return self._wrote(
            replication.create_topics(image, request, self.settings, self._rng), now_ms
        )

    def delete_topics(
        self, image: MetadataImage, request: DeleteTopicsRequest, now_ms: int
    ) -> ControllerResult[DeleteTopicsResponse]:
        return self._wrote(replication.delete_topics(image, request), now_ms)

    def create_partitions(
        self, image: MetadataImage, request: CreatePartitionsRequest, now_ms: int
    ) -> ControllerResult[CreatePartitionsResponse]:
        return self._wrote(
            replication.create_partitions(image, request, self.settings, self._rng), now_ms
        )

    def alter_partition(
        self, image: MetadataImage, request: AlterPartitionRequest, now_ms: int
    ) -> ControllerResult[AlterPartitionResponse]:
        return self._wrote(leadership.alter_partition(image, request, self._unclean(image)), now_ms)

    def elect_leaders(
        self, image: MetadataImage, request: ElectLeadersRequest, now_ms: int
    ) -> ControllerResult[ElectLeadersResponse]:
        return self._wrote(leadership.elect_leaders(image, request, self._unclean(image)), now_ms)

    def alter_partition_reassignments(
        self, image: MetadataImage, request: AlterPartitionReassignmentsRequest, now_ms: int
    ) -> ControllerResult[AlterPartitionReassignmentsResponse]:
        return self._wrote(
            reassignment.alter_partition_reassignments(image, request, self._unclean(image)),
            now_ms,
        )

    def incremental_alter_configs(
        self, image: MetadataImage, request: IncrementalAlterConfigsRequest, now_ms: int
    ) -> ControllerResult[IncrementalAlterConfigsResponse]:
        result = configs.incremental_alter_configs(image, request)
        return self._wrote(elr.clearing_elr_on_min_isr_change(image, result), now_ms)

    def legacy_alter_configs(
        self, image: MetadataImage, request: LegacyAlterConfigsRequest, now_ms: int
    ) -> ControllerResult[IncrementalAlterConfigsResponse]:
        """Kafka's AlterConfigs: each resource's whole config set is replaced."""
        result = configs.legacy_alter_configs(image, request)
        return self._wrote(elr.clearing_elr_on_min_isr_change(image, result), now_ms)

    def allocate_producer_ids(
        self, image: MetadataImage, request: AllocateProducerIdsRequest, now_ms: int
    ) -> ControllerResult[AllocateProducerIdsResponse]:
        return self._wrote(producer_ids.allocate_producer_ids(image, request), now_ms)

    def create_acls(
        self, image: MetadataImage, request: CreateAclsRequest, now_ms: int
    ) -> ControllerResult[CreateAclsResponse]:
        return self._wrote(acls.create_acls(image, request, self._rng), now_ms)

    def delete_acls(
        self, image: MetadataImage, request: DeleteAclsRequest, now_ms: int
    ) -> ControllerResult[DeleteAclsResponse]:
        return self._wrote(acls.delete_acls(image, request), now_ms)

    def alter_user_scram_credentials(
        self, image: MetadataImage, request: AlterUserScramCredentialsRequest, now_ms: int
    ) -> ControllerResult[AlterUserScramCredentialsResponse]:
        return self._wrote(scram.alter_user_scram_credentials(image, request), now_ms)

    def alter_client_quotas(
        self, image: MetadataImage, request: AlterClientQuotasRequest, now_ms: int
    ) -> ControllerResult[AlterClientQuotasResponse]:
        return self._wrote(client_quotas.alter_client_quotas(image, request), now_ms)

    def update_features(
        self, image: MetadataImage, request: UpdateFeaturesRequest, now_ms: int
    ) -> ControllerResult[UpdateFeaturesResponse]:
        return self._wrote(features.update_features(image, request), now_ms)

    def delegation_token(
        self, image: MetadataImage, request: DelegationTokenRequest, now_ms: int, wall_clock_ms: int
    ) -> ControllerResult[Any]:
        """Create/Renew/ExpireDelegationToken (KIP-48, ``managers/delegation_tokens.py``). A
        token's issue, expiry and max timestamps are Unix times (Kafka's ``time.milliseconds()``)
        that clients read and every node compares: they come from ``wall_clock_ms``, never from
        the monotonic ``now_ms``."""
        result = delegation_tokens.handle(image, request, self.settings, self._rng, wall_clock_ms)
        return self._wrote(result, now_ms)

    def maybe_sweep_expired_delegation_tokens(
        self, image: MetadataImage, now_ms: int, wall_clock_ms: int
    ) -> ControllerResult[int] | None:
        """Remove expired delegation tokens every delegation.token.expiry.check.interval.ms
        (Kafka's ``sweepExpiredDelegationTokens``); None when not due. The schedule is
        monotonic, the tokens' timestamps are compared with ``wall_clock_ms``."""
        if now_ms < self._next_token_sweep_ms:
            return None
        self._next_token_sweep_ms = now_ms + self.settings.delegation_token_expiry_check_interval_ms
        swept = delegation_tokens.sweep_expired_tokens(image, wall_clock_ms)
        return self._wrote(swept, now_ms)

    def fence_stale_brokers(
        self, image: MetadataImage, now_ms: int
    ) -> ControllerResult[tuple[int, ...]]:
        """Fence the longest-silent broker whose session expired (one per batch)."""
        return self._wrote(
            cluster.fence_stale_broker(image, self.sessions, now_ms, self._unclean(image)), now_ms
        )

    def maybe_noop(self, image: MetadataImage, now_ms: int) -> ControllerResult[None] | None:
        """A ``NoOpRecord`` when nothing was written for metadata.max.idle.interval.ms, so
        brokers see the log advance (and the leader's term confirmed) while the cluster idles."""
        bootstrap = elr.bootstrap_records(image, self.settings.eligible_leader_replicas_version)
        if bootstrap:  # a new cluster: its first records are its feature levels
            return self._wrote(ControllerResult(bootstrap, None), now_ms)
        if now_ms - self._last_write_ms < self.settings.metadata_max_idle_interval_ms:
            return None
        return self._wrote(ControllerResult((NoOpRecord(),), None), now_ms)

    def maybe_balance_partition_leaders(
        self, image: MetadataImage, now_ms: int
    ) -> ControllerResult[bool] | None:
        """PREFERRED elections for partitions not led by their preferred replica, when due
        (Kafka's ``MAYBE_BALANCE_PARTITION_LEADERS`` event); None when not due.

        The run stays due until the shell reports its write's outcome
        (``leader_balance.committed`` / ``failed``): a write retried over a newer image (a
        STALE proposal) computes the run again instead of losing it."""
        if not self.leader_balance.is_due(now_ms):
            return None
        result = leader_balance.maybe_balance_partition_leaders(
            image, self.settings.max_elections_per_imbalance, self._unclean(image)
        )
        return self._wrote(result, now_ms)

    def next_deadline_ms(self, image: MetadataImage) -> int:
        """When to call ``fence_stale_brokers`` / ``maybe_noop`` /
        ``maybe_balance_partition_leaders`` next."""
        deadlines = [self._last_write_ms + self.settings.metadata_max_idle_interval_ms]
        if elr.bootstrap_records(image, self.settings.eligible_leader_replicas_version):
            deadlines.append(self._last_write_ms)  # bootstrap a new cluster now
        expiry = self.sessions.next_expiry_ms(image)
        if expiry is not None:
            deadlines.append(expiry)
        if self.leader_balance.due_ms is not None:
            deadlines.append(self.leader_balance.due_ms)
        if image.delegation_tokens.tokens:
            deadlines.append(self._next_token_sweep_ms)
        return min(deadlines)


def not_controller(message: str | None = None) -> ApiError:
    """The error a standby controller answers with (the shell adds the leader's address)."""
    return ApiError.of(Errors.NOT_CONTROLLER, message)
