"""The transactional producer's APIs: AddPartitionsToTxn (v0-v4), AddOffsetsToTxn (v0-v3),
EndTxn (v0-v3) and TxnOffsetCommit (v0-v3) — Kafka's ``KafkaApis`` handlers in front of the
transaction coordinator (``coordinator.transaction.shell.TransactionCoordinatorShell``) and, for
TxnOffsetCommit, the group coordinator (KIP-98, KIP-447, KIP-890).

What each handler checks before the coordinators decide (``KafkaApis`` 3.7):

* AddPartitionsToTxn v0-v3 (a client): WRITE on the transactional id, else every partition is
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED
  (always for an internal topic: a client never adds ``__consumer_offsets`` itself, that is
  AddOffsetsToTxn's job — Kafka leaves ``Topic.isInternal`` topics out of the authorized ones);
  a partition the metadata does not know, UNKNOWN_TOPIC_OR_PARTITION; with any of those errors
  the other partitions answer OPERATION_NOT_ATTEMPTED and nothing is added. Otherwise the
  coordinator's one error goes to every partition.
* AddPartitionsToTxn v4 (a broker verifying a transactional write, KIP-890 part 1): CLUSTER_ACTION
  on the cluster, else the top-level CLUSTER_AUTHORIZATION_FAILED; batched transactions, each
  either ``verify_only`` (is each partition already in the transaction?) or added as above,
  with no check of the transactional id or the topics (the broker asking checked them).
* AddOffsetsToTxn: WRITE on the transactional id, READ on the group; the group's
  ``__consumer_offsets`` partition joins the transaction.
* EndTxn: WRITE on the transactional id.
* TxnOffsetCommit: WRITE on the transactional id and READ on the group (else every partition
  answers the refusal); READ on each topic; unknown partitions UNKNOWN_TOPIC_OR_PARTITION; the
  rest go to the group coordinator, which keeps them pending until the transaction's marker.
  Below v2 COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (older clients
  treat it as fatal, ``TxnOffsetCommitResponse``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pykraft.broker.handlers.find_coordinator import TRANSACTION_KEY_TYPE, CoordinatorTopic
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import INTERNAL_TOPICS
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.coordinator.transaction.config import (
    TRANSACTION_STATE_TOPIC,
    transaction_topic_configs,
)
from pykraft.coordinator.transaction.effects import error_for_version
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

_AddPartitions: Any = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
_AddOffsets: Any = response_class(ApiKey.ADD_OFFSETS_TO_TXN)
_EndTxn: Any = response_class(ApiKey.END_TXN)
_TxnOffsetCommit: Any = response_class(ApiKey.TXN_OFFSET_COMMIT)
FIRST_BATCHED_ADD_PARTITIONS_VERSION = 4
FIRST_LOAD_IN_PROGRESS_TXN_OFFSET_COMMIT_VERSION = 2


def transaction_handlers(
    services: BrokerServices,
    transactions: TransactionCoordinatorShell,
    groups: GroupCoordinatorShell,
) -> dict[ApiKey, ApiHandler]:
    async def add_partitions(context: RequestContext, request: Any) -> Any:
        return await add_partitions_to_txn(services, transactions, context, request)

    async def add_offsets(context: RequestContext, request: Any) -> Any:
        return await add_offsets_to_txn(services, transactions, groups, context, request)

    async def end(context: RequestContext, request: Any) -> Any:
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if _may_write(services, context, request.transactional_id):
            error = await transactions.end_txn(
                request.transactional_id,
                request.producer_id,
                request.producer_epoch,
                bool(request.committed),
            )
            error = error_for_version(error, ApiKey.END_TXN, request.version)
        return _EndTxn(version=request.version, throttle_time_ms=0, error_code=error)

    async def txn_offset_commit(context: RequestContext, request: Any) -> Any:
        return await commit_txn_offsets(services, groups, context, request)

    return {
        ApiKey.ADD_PARTITIONS_TO_TXN: kafka_python_handler(add_partitions),
        ApiKey.ADD_OFFSETS_TO_TXN: kafka_python_handler(add_offsets),
        ApiKey.END_TXN: kafka_python_handler(end),
        ApiKey.TXN_OFFSET_COMMIT: kafka_python_handler(txn_offset_commit),
    }


def transaction_coordinator_topic(transactions: TransactionCoordinatorShell) -> CoordinatorTopic:
    """``__transaction_state`` as FindCoordinator's key type 1 sees it."""
    config = transactions.config
    return CoordinatorTopic(
        key_type=TRANSACTION_KEY_TYPE,
        topic=TRANSACTION_STATE_TOPIC,
        partitions=config.transaction_state_log_num_partitions,
        replication_factor=config.transaction_state_log_replication_factor,
        configs=transaction_topic_configs(config),
        partition_for=transactions.partition_for,
        resource_type=ResourceType.TRANSACTIONAL_ID,
        refusal=Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )


def _may_write(services: BrokerServices, context: RequestContext, transactional_id: str) -> bool:
    return services.authorizer.authorize(
        context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    )


def _partitions(topics: Iterable[Any]) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in topics for index in topic.partitions]


# ------------------------------------------------------------------ AddPartitionsToTxn


async def add_partitions_to_txn(
    services: BrokerServices,
    transactions: TransactionCoordinatorShell,
    context: RequestContext,
    request: Any,
) -> Any:
    version = request.version
    if version < FIRST_BATCHED_ADD_PARTITIONS_VERSION:
        results = await _add_partitions(
            services,
            transactions,
            context,
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=request.v3_and_below_producer_id,
            producer_epoch=request.v3_and_below_producer_epoch,
            partitions=_partitions(request.v3_and_below_topics),
            verify_only=False,
            version=version,
            from_client=True,
        )
        return _AddPartitions(
            version=version,
            throttle_time_ms=0,
            results_by_topic_v3_and_below=_topic_results(results),
        )
    if not services.authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION):
        return _AddPartitions(
            version=version,
            throttle_time_ms=0,
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            results_by_transaction=[],
        )
    answers = []
    for transaction in request.transactions:
        results = await _add_partitions(
            services,
            transactions,
            context,
            transactional_id=transaction.transactional_id,
            producer_id=transaction.producer_id,
            producer_epoch=transaction.producer_epoch,
            partitions=_partitions(transaction.topics),
            verify_only=bool(transaction.verify_only),
            version=version,
            from_client=False,
        )
        answers.append(
            _AddPartitions.AddPartitionsToTxnResult(
                transactional_id=transaction.transactional_id,
                topic_results=_topic_results(results),
            )
        )
    return _AddPartitions(
        version=version, throttle_time_ms=0, error_code=Errors.NONE, results_by_transaction=answers
    )


async def _add_partitions(
    services: BrokerServices,
    transactions: TransactionCoordinatorShell,
    context: RequestContext,
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[TopicPartition],
    verify_only: bool,
    version: int,
    from_client: bool,
) -> dict[TopicPartition, Errors]:
    """One transaction's partitions; ``from_client`` (v0-v3) checks the ACLs too."""
    if from_client and not _may_write(services, context, transactional_id):
        return dict.fromkeys(partitions, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    topics = {tp.topic for tp in partitions}
    writable = frozenset(topics)
    if from_client:
        writable = services.authorizer.authorized(
            context,
            AclOperation.WRITE,
            ResourceType.TOPIC,
            (topic for topic in topics if topic not in INTERNAL_TOPICS),
        )
    image = services.metadata()
    refused: dict[TopicPartition, Errors] = {}
    for tp in partitions:
        if tp.topic not in writable:
            refused[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
        elif not image.topics.contains(tp.topic, tp.partition):
            refused[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
    if refused:
        return {tp: refused.get(tp, Errors.OPERATION_NOT_ATTEMPTED) for tp in partitions}
    results = await transactions.add_partitions_to_txn(
        transactional_id, producer_id, producer_epoch, partitions, verify_only=verify_only
    )
    return {
        tp: error_for_version(error, ApiKey.ADD_PARTITIONS_TO_TXN, version)
        for tp, error in results.items()
    }


def _topic_results(results: dict[TopicPartition, Errors]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for tp, error in results.items():
        by_topic.setdefault(tp.topic, []).append(
            _AddPartitions.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult(
                partition_index=tp.partition, partition_error_code=error
            )
        )
    return [
        _AddPartitions.AddPartitionsToTxnTopicResult(name=topic, results_by_partition=partitions)
        for topic, partitions in by_topic.items()
    ]


# ------------------------------------------------------------------ AddOffsetsToTxn


async def add_offsets_to_txn(
    services: BrokerServices,
    transactions: TransactionCoordinatorShell,
    groups: GroupCoordinatorShell,
    context: RequestContext,
    request: Any,
) -> Any:
    if not _may_write(services, context, request.transactional_id):
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not services.authorizer.authorize(
        context, AclOperation.READ, ResourceType.GROUP, request.group_id
    ):
        error = Errors.GROUP_AUTHORIZATION_FAILED
    else:
        error = await transactions.add_offsets_to_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            TopicPartition(OFFSETS_TOPIC, groups.partition_for(request.group_id)),
        )
        error = error_for_version(error, ApiKey.ADD_OFFSETS_TO_TXN, request.version)
    return _AddOffsets(version=request.version, throttle_time_ms=0, error_code=error)


# ------------------------------------------------------------------ TxnOffsetCommit


async def commit_txn_offsets(
    services: BrokerServices,
    groups: GroupCoordinatorShell,
    context: RequestContext,
    request: Any,
) -> Any:
    version = request.version
    asked = [
        (TopicPartition(topic.name, partition.partition_index), partition)
        for topic in request.topics
        for partition in topic.partitions
    ]
    refusal = None
    if not _may_write(services, context, request.transactional_id):
        refusal = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not services.authorizer.authorize(
        context, AclOperation.READ, ResourceType.GROUP, request.group_id
    ):
        refusal = Errors.GROUP_AUTHORIZATION_FAILED
    if refusal is not None:
        return _txn_offset_commit_response(version, dict.fromkeys((tp for tp, _ in asked), refusal))
    readable = services.authorizer.authorized(
        context, AclOperation.READ, ResourceType.TOPIC, (tp.topic for tp, _ in asked)
    )
    image = services.metadata()
    now_ms = services.wall_clock_ms()
    errors: dict[TopicPartition, Errors] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, partition in asked:
        if tp.topic not in readable:
            errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
        elif not image.topics.contains(tp.topic, tp.partition):
            errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
        else:
            offsets[tp] = OffsetAndMetadata(
                offset=partition.committed_offset,
                leader_epoch=partition.committed_leader_epoch if version >= 2 else -1,
                metadata=partition.committed_metadata or "",
                commit_timestamp_ms=now_ms,
                expire_timestamp_ms=None,
            )
    if offsets:
        committed = await groups.txn_offset_commit(
            group_id=request.group_id,
            transactional_id=request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            member_id=request.member_id if version >= 3 else "",
            generation_id=request.generation_id if version >= 3 else -1,
            group_instance_id=request.group_instance_id if version >= 3 else None,
            offsets=offsets,
        )
        for tp, error in committed.items():
            if (
                error is Errors.COORDINATOR_LOAD_IN_PROGRESS
                and version < FIRST_LOAD_IN_PROGRESS_TXN_OFFSET_COMMIT_VERSION
            ):
                error = Errors.COORDINATOR_NOT_AVAILABLE
            errors[tp] = error
    return _txn_offset_commit_response(version, errors)


def _txn_offset_commit_response(version: int, errors: dict[TopicPartition, Errors]) -> Any:
    topic_type = _TxnOffsetCommit.TxnOffsetCommitResponseTopic
    partition_type = topic_type.TxnOffsetCommitResponsePartition
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            partition_type(partition_index=tp.partition, error_code=error)
        )
    return _TxnOffsetCommit(
        version=version,
        throttle_time_ms=0,
        topics=[topic_type(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
