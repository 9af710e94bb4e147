"""The broker's Kafka API handlers, one module per API group, registered with ``KafkaApis``.

  produce.py       Produce v3-v11 (v0-v2 are answered by KafkaApis itself)
  fetch.py         Fetch v4-v17 (v0-v3 are answered by KafkaApis itself), FileSlices straight
                   from the segments, no fetch sessions
  list_offsets.py  ListOffsets v1-v9; list_offsets_v0.py v0's segment offsets (Burrow)
  offsets_for_leader_epoch.py  OffsetsForLeaderEpoch v0-v4 from the leader-epoch cache
  delete_records.py  DeleteRecords v0-v2: the leaders' log starts move, answered at the low
                   watermark (``broker.delete_records``)
  log_dirs.py      DescribeLogDirs v0-v4 from the ``LogManager``
  alter_replica_log_dirs.py  AlterReplicaLogDirs v0-v2 (KIP-113) via ``broker.log_dir_mover``
  metadata.py      Metadata v0-v12 from the metadata image (auto-create, on by default)
  init_producer_id.py  InitProducerId v0-v5: producer ids for idempotent producers from the
                   broker's ``broker.producer_ids.ProducerIdManager``, for transactional ones
                   from the transaction coordinator
  transactions.py  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (KIP-98/447/890)
  write_txn_markers.py  WriteTxnMarkers: a coordinator's markers appended as leader
  txn_admin.py     DescribeProducers, DescribeTransactions, ListTransactions (KIP-664)
  admin.py         CreateTopics, DeleteTopics, CreatePartitions forwarded to the
                   controller through ``ControllerClient``; DescribeCluster from the image
  configs.py       DescribeConfigs from the image (sources, synonyms, broker loggers);
                   AlterConfigs, IncrementalAlterConfigs checked, then forwarded
  reassignments.py AlterPartitionReassignments, ListPartitionReassignments forwarded to the
                   controller (KIP-455)
  security.py      CreateAcls, DescribeAcls, DeleteAcls, AlterUserScramCredentials,
                   DescribeUserScramCredentials forwarded to the controller (KIP-554)
  elect_leaders.py ElectLeaders (KIP-460: PREFERRED and UNCLEAN) forwarded to the controller
  describe_quorum.py  DescribeQuorum v0-v2 from the active controller's Raft state
  describe_topic_partitions.py  DescribeTopicPartitions v0 (KIP-966) from the image, paged
  update_features.py  UpdateFeatures v0-v1 (KIP-584) forwarded to the controller
  unregister_broker.py  UnregisterBroker v0 (KIP-631) forwarded to the controller
  raft_voters.py   AddRaftVoter v0, RemoveRaftVoter v0 (KIP-853) forwarded to the controller
  client_metrics.py  ListClientMetricsResources v0 (KIP-714): CLIENT_METRICS subscriptions
                   from the image
  client_quotas.py DescribeClientQuotas from the image, AlterClientQuotas forwarded (KIP-546)
  delegation_tokens.py Create/Renew/ExpireDelegationToken forwarded, Describe from the image
  forwarding.py    what the forwarding handlers share: services bound, the client's cluster
                   permission checked, the controller's error as an ``ApiError``
  find_coordinator.py  FindCoordinator v0-v6 for groups and transactional ids
  groups.py        JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
                   OffsetFetch, DescribeGroups, ListGroups over ``coordinator.group``'s coordinator
  group_deletes.py DeleteGroups v0-v2, OffsetDelete v0 (registered by groups.py)
  consumer_groups.py  ConsumerGroupHeartbeat v0, ConsumerGroupDescribe v0 (KIP-848)

Every handler checks what Kafka's ``KafkaApis`` authorizes (``broker.authorization``'s
``API_ACL_CHECKS``) through ``services.authorizer``.

Wiring (the composition root)::

    services = BrokerServices(broker_id=..., cluster_id=..., replica_manager=...,
                              metadata=loader_image, controller=controller_client,
                              wall_clock_ms=clock.wall_clock_ms)
    kafka_apis.register_all(broker_handlers(services, producer_ids=producer_id_manager,
                                            group_coordinator=group_coordinator_shell))
"""

from __future__ import annotations

from pykraft.broker.controller_api import (
    ControllerClient,
    ControllerError,
)
from pykraft.broker.handlers.admin import admin_handlers
from pykraft.broker.handlers.alter_replica_log_dirs import alter_replica_log_dirs_handler
from pykraft.broker.handlers.client_metrics import list_client_metrics_resources_handler
from pykraft.broker.handlers.client_quotas import client_quota_handlers
from pykraft.broker.handlers.configs import config_handlers
from pykraft.broker.handlers.consumer_groups import consumer_group_handlers
from pykraft.broker.handlers.delegation_tokens import delegation_token_handlers
from pykraft.broker.handlers.delete_records import delete_records_handler
from pykraft.broker.handlers.describe_quorum import describe_quorum_handler
from pykraft.broker.handlers.describe_topic_partitions import describe_topic_partitions_handler
from pykraft.broker.handlers.elect_leaders import elect_leaders_handler
from pykraft.broker.handlers.fetch import fetch_handler
from pykraft.broker.handlers.find_coordinator import find_coordinator_handler
from pykraft.broker.handlers.groups import group_handlers, offsets_coordinator_topic
from pykraft.broker.handlers.init_producer_id import ProducerIdSource, init_producer_id_handler
from pykraft.broker.handlers.list_offsets import list_offsets_handler
from pykraft.broker.handlers.log_dirs import describe_log_dirs_handler
from pykraft.broker.handlers.metadata import metadata_handler
from pykraft.broker.handlers.offsets_for_leader_epoch import offsets_for_leader_epoch_handler
from pykraft.broker.handlers.produce import produce_handler
from pykraft.broker.handlers.raft_voters import (
    add_raft_voter_handler,
    remove_raft_voter_handler,
)
from pykraft.broker.handlers.reassignments import reassignment_handlers
from pykraft.broker.handlers.security import security_handlers
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.handlers.transactions import (
    transaction_coordinator_topic,
    transaction_handlers,
)
from pykraft.broker.handlers.txn_admin import transaction_admin_handlers
from pykraft.broker.handlers.unregister_broker import unregister_broker_handler
from pykraft.broker.handlers.update_features import update_features_handler
from pykraft.broker.handlers.write_txn_markers import write_txn_markers_handler
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.protocol.api_keys import ApiKey


def broker_handlers(
    services: BrokerServices,
    producer_ids: ProducerIdSource | None = None,
    group_coordinator: GroupCoordinatorShell | None = None,
    transaction_coordinator: TransactionCoordinatorShell | None = None,
) -> dict[ApiKey, ApiHandler]:
    """Every handler of this package, by API key, for ``KafkaApis.register_all``.

    InitProducerId is served only with ``producer_ids`` (a broker always passes its
    ``ProducerIdManager``; harnesses that produce no idempotent batches may leave it out), the
    group APIs only with ``group_coordinator`` (likewise), the transaction APIs only with both
    coordinators. WriteTxnMarkers and DescribeProducers are always served: they act on the
    partitions this broker leads.
    """
    handlers = {
        ApiKey.PRODUCE: produce_handler(services),
        ApiKey.FETCH: fetch_handler(services),
        ApiKey.LIST_OFFSETS: list_offsets_handler(services),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: offsets_for_leader_epoch_handler(services),
        ApiKey.DELETE_RECORDS: delete_records_handler(services),
        ApiKey.DESCRIBE_LOG_DIRS: describe_log_dirs_handler(services),
        ApiKey.ALTER_REPLICA_LOG_DIRS: alter_replica_log_dirs_handler(services),
        **admin_handlers(services),
        **config_handlers(services),
        **security_handlers(services),
        ApiKey.ELECT_LEADERS: elect_leaders_handler(services),
        ApiKey.DESCRIBE_QUORUM: describe_quorum_handler(services),
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: describe_topic_partitions_handler(services),
        ApiKey.UPDATE_FEATURES: update_features_handler(services),
        ApiKey.UNREGISTER_BROKER: unregister_broker_handler(services),
        ApiKey.ADD_RAFT_VOTER: add_raft_voter_handler(services),
        ApiKey.REMOVE_RAFT_VOTER: remove_raft_voter_handler(services),
        ApiKey.LIST_CONFIG_RESOURCES: list_client_metrics_resources_handler(services),
        **reassignment_handlers(services),
        **client_quota_handlers(services),
        **delegation_token_handlers(services),
        ApiKey.WRITE_TXN_MARKERS: write_txn_markers_handler(services, group_coordinator),
        **transaction_admin_handlers(services, transaction_coordinator),
    }
    if producer_ids is not None:
        handlers[ApiKey.INIT_PRODUCER_ID] = init_producer_id_handler(
            producer_ids, services.authorizer, transaction_coordinator
        )
    coordinators = []
    if group_coordinator is not None:
        handlers.update(group_handlers(services, group_coordinator))
        handlers.update(consumer_group_handlers(services, group_coordinator))
        coordinators.append(offsets_coordinator_topic(group_coordinator))
    if group_coordinator is not None and transaction_coordinator is not None:
        handlers.update(transaction_handlers(services, transaction_coordinator, group_coordinator))
        coordinators.append(transaction_coordinator_topic(transaction_coordinator))
    if coordinators:
        handlers[ApiKey.FIND_COORDINATOR] = find_coordinator_handler(services, tuple(coordinators))
    handlers[ApiKey.METADATA] = metadata_handler(services, tuple(coordinators))
    return handlers


__all__ = [
    "BrokerServices",
    "ControllerClient",
    "ControllerError",
    "ProducerIdSource",
    "broker_handlers",
]
