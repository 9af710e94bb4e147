"""The operator's view of transactions (KIP-664): DescribeProducers, DescribeTransactions and
ListTransactions, so a hanging transaction can be found (and then aborted with Kafka's
``kafka-transactions.sh`` or an AdminClient).

* DescribeProducers (Kafka's ``handleDescribeProducersRequest``): per topic, a legal name (else
  INVALID_TOPIC_EXCEPTION), READ on it (else TOPIC_AUTHORIZATION_FAILED) and a topic the
  metadata knows (else UNKNOWN_TOPIC_OR_PARTITION); then per partition the producers this
  broker's replica remembers — id, epoch, last sequence, last timestamp, coordinator epoch and
  the first offset of its open transaction (-1 for none) — on a follower as on the leader (KIP-664:
  an operator may ask any replica, ``DescribeProducersOptions.brokerId``). A partition not hosted
  here answers what ``ReplicaManager.getPartitionOrError`` does: NOT_LEADER_OR_FOLLOWER when the
  metadata has it, UNKNOWN_TOPIC_OR_PARTITION when it does not, KAFKA_STORAGE_ERROR offline.
* DescribeTransactions: per transactional id, DESCRIBE on it (else
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED, the other fields at the schema's defaults), then the
  coordinator's state of it; partitions of topics the principal may not DESCRIBE are left out
  (``handleDescribeTransactionsRequest``).
* ListTransactions: the coordinator's transactions on this broker, filtered by state and producer
  id, from v1 by how long they have run (KIP-994), and by DESCRIBE on each transactional id;
  unknown state names are echoed back in ``unknown_state_filters``
  (``TransactionStateManager.listTransactionStates``).
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.coordinator.transaction.effects import TransactionListing
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.replica.partition_state import PartitionError
from pykraft.storage.topic_partition import TopicPartition, validate_topic_name

_DescribeProducers: Any = response_class(ApiKey.DESCRIBE_PRODUCERS)
_DescribeTransactions: Any = response_class(ApiKey.DESCRIBE_TRANSACTIONS)
_ListTransactions: Any = response_class(ApiKey.LIST_TRANSACTIONS)
NO_TXN_START_OFFSET = -1


def transaction_admin_handlers(
    services: BrokerServices, transactions: TransactionCoordinatorShell | None
) -> dict[ApiKey, ApiHandler]:
    handlers = {ApiKey.DESCRIBE_PRODUCERS: kafka_python_handler(_describe_producers(services))}
    if transactions is not None:
        handlers[ApiKey.DESCRIBE_TRANSACTIONS] = kafka_python_handler(
            _describe_transactions(services, transactions)
        )
        handlers[ApiKey.LIST_TRANSACTIONS] = kafka_python_handler(
            _list_transactions(services, transactions)
        )
    return handlers


def _describe_producers(services: BrokerServices) -> Any:
    async def handle(context: RequestContext, request: Any) -> Any:
        topic_type = _DescribeProducers.TopicResponse
        topics = []
        for topic in request.topics:
            refusal = _topic_error(services, context, topic.name)
            partitions = [
                _partition_producers(services, TopicPartition(topic.name, index), refusal)
                for index in topic.partition_indexes
            ]
            topics.append(topic_type(name=topic.name, partitions=partitions))
        return _DescribeProducers(version=request.version, throttle_time_ms=0, topics=topics)

    return handle


def _partition_producers(
    services: BrokerServices, tp: TopicPartition, refusal: Errors | None
) -> Any:
    partition_type = _DescribeProducers.TopicResponse.PartitionResponse
    if refusal is not None:
        return partition_type(
            partition_index=tp.partition,
            error_code=refusal,
            error_message=refusal.name,
            active_producers=[],
        )
    error, producers = _active_producers(services, tp)
    return partition_type(
        partition_index=tp.partition,
        error_code=error,
        error_message=None,
        active_producers=producers,
    )


def _topic_error(services: BrokerServices, context: RequestContext, topic: str) -> Errors | None:
    """DescribeProducers' checks of a whole topic, in Kafka's order."""
    try:
        validate_topic_name(topic)
    except ValueError:
        return Errors.INVALID_TOPIC_EXCEPTION
    if not services.authorizer.authorize(context, AclOperation.READ, ResourceType.TOPIC, topic):
        return Errors.TOPIC_AUTHORIZATION_FAILED
    if topic not in services.metadata().topics.by_name:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    return None


def _active_producers(services: BrokerServices, tp: TopicPartition) -> tuple[Errors, list[Any]]:
    """``ReplicaManager.activeProducerState``: this replica's producers, leader or follower."""
    try:
        partition = services.replica_manager.partition_or_error(tp)
    except PartitionError as error:
        return error.error, []
    state_type = _DescribeProducers.TopicResponse.PartitionResponse.ProducerState
    return Errors.NONE, [
        state_type(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=(
                NO_TXN_START_OFFSET
                if entry.current_txn_first_offset is None
                else entry.current_txn_first_offset
            ),
        )
        for entry in partition.active_producers()
    ]


def _describe_transactions(
    services: BrokerServices, transactions: TransactionCoordinatorShell
) -> Any:
    async def handle(context: RequestContext, request: Any) -> Any:
        state_type = _DescribeTransactions.TransactionState
        topic_type = state_type.TopicData
        states = []
        for transactional_id in request.transactional_ids:
            if not services.authorizer.authorize(
                context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
            ):
                error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                states.append(_no_description(state_type, transactional_id, error))
                continue
            [found] = transactions.describe_transactions([transactional_id])
            described = services.authorizer.authorized(
                context, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in found.topics)
            )
            states.append(
                state_type(
                    error_code=found.error,
                    transactional_id=transactional_id,
                    transaction_state=found.state,
                    transaction_timeout_ms=found.transaction_timeout_ms,
                    transaction_start_time_ms=found.transaction_start_time_ms,
                    producer_id=found.producer_id,
                    producer_epoch=found.producer_epoch,
                    topics=[
                        topic_type(topic=topic, partitions=list(partitions))
                        for topic, partitions in found.topics
                        if topic in described
                    ],
                )
            )
        return _DescribeTransactions(
            version=request.version, throttle_time_ms=0, transaction_states=states
        )

    return handle


def _no_description(state_type: Any, transactional_id: str, error: Errors) -> Any:
    """A refused id: its error, every other field at DescribeTransactionsResponse's defaults
    (none is declared, so 0 and the empty string), as Kafka leaves them."""
    return state_type(
        error_code=error,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=0,
        producer_id=0,
        producer_epoch=0,
        topics=[],
    )


def _list_transactions(services: BrokerServices, transactions: TransactionCoordinatorShell) -> Any:
    async def handle(context: RequestContext, request: Any) -> Any:
        listed = transactions.list_transactions(
            tuple(request.state_filters), tuple(request.producer_id_filters)
        )
        duration_filter_ms = request.duration_filter if request.version >= 1 else -1
        now_ms = services.wall_clock_ms()
        visible = services.authorizer.authorized(
            context,
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            (t.transactional_id for t in listed.transactions),
        )
        state_type = _ListTransactions.TransactionState
        return _ListTransactions(
            version=request.version,
            throttle_time_ms=0,
            error_code=listed.error,
            unknown_state_filters=list(listed.unknown_state_filters),
            transaction_states=[
                state_type(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed.transactions
                if t.transactional_id in visible
                and running_longer_than(t, duration_filter_ms, now_ms)
            ],
        )

    return handle


def running_longer_than(listing: TransactionListing, duration_filter_ms: int, now_ms: int) -> bool:
    """ListTransactions v1's duration filter (KIP-994, ``listTransactionStates``): with a filter
    >= 0, only transactions started more than that long before ``now_ms``; an id with none
    started (-1) always qualifies, as in Kafka."""
    return duration_filter_ms < 0 or now_ms - listing.txn_start_timestamp_ms > duration_filter_ms
