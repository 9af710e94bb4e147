"""InitProducerId (v0-v5): Kafka's ``handleInitProducerIdRequest`` (``KafkaApis``) in front of
``TransactionCoordinator.handleInitProducerId``.

kafka-python 3.x (by default), confluent-kafka with ``enable.idempotence=true`` and aiokafka with
``enable_idempotence`` send it before their first Produce; transactional producers send it from
``init_transactions()`` to their transaction coordinator. What is answered:

* no transactional id: any broker answers with a producer id never handed out before, epoch 0 —
  "if the transactional id is null, then always blindly accept the request and return a new
  producerId", also when a v3+ request names the client's current id and epoch (KIP-360's epoch
  bump is for transactional ids; an idempotent producer simply starts over under a new id);
* a transactional id: the transaction coordinator decides (``coordinator.transaction``: a new id
  or an epoch bump, fencing the previous instance, aborting its open transaction first,
  NOT_COORDINATOR on a broker that does not own the id); PRODUCER_FENCED is answered
  INVALID_PRODUCER_EPOCH below v4 (KIP-588);
* no id at hand (the broker's block is used up and the next one is still on its way from the
  controller, see ``broker.producer_ids``): COORDINATOR_LOAD_IN_PROGRESS, which every client
  retries — Kafka's ``RPCProducerIdManager`` answers it "rather than REQUEST_TIMED_OUT since
  older clients treat the error as fatal";
* v3+ with only one of producer id and producer epoch set: INVALID_REQUEST (``KafkaApis``,
  KIP-360: both are -1 or both name the producer);
* an empty transactional id: INVALID_REQUEST (``TransactionCoordinator``).

Authorization: WRITE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
without one, IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679). An error answer
carries producer id -1 and epoch -1 (Kafka's ``initTransactionError``).
"""

from __future__ import annotations

from typing import Any, Protocol

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.coordinator.transaction.effects import ProducerIdAndEpoch, error_for_version
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

_Response: Any = response_class(ApiKey.INIT_PRODUCER_ID)


class ProducerIdSource(Protocol):
    """``broker.producer_ids.ProducerIdManager``."""

    async def generate_producer_id(self) -> int | None:
        """A producer id never handed out before, or None while none is at hand."""
        ...


def init_producer_id_handler(
    producer_ids: ProducerIdSource,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
    transactions: TransactionCoordinatorShell | None = None,
) -> ApiHandler:
    async def handle(request: RequestContext, message: Any) -> Any:
        refusal = authorization_error(authorizer, request, message)
        if refusal is not None:
            return response(message.version, refusal, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        if message.transactional_id and transactions is not None and request_error(message) is None:
            return await transactional_init_producer_id(transactions, message)
        return await init_producer_id(producer_ids, message)

    return kafka_python_handler(handle)


def authorization_error(
    authorizer: RequestAuthorizer, context: RequestContext, request: Any
) -> Errors | None:
    """``handleInitProducerIdRequest``: WRITE on the transactional id, else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, IDEMPOTENT_WRITE on the cluster or
    WRITE on some topic (KIP-679's ``authorizeByResourceType``), else
    CLUSTER_AUTHORIZATION_FAILED."""
    if request.transactional_id is not None:  # even "", which the coordinator then refuses
        allowed = authorizer.authorize(
            context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        )
        return None if allowed else Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if authorizer.authorize_cluster(context, AclOperation.IDEMPOTENT_WRITE):
        return None
    if authorizer.authorize_by_resource_type(context, AclOperation.WRITE, ResourceType.TOPIC):
        return None
    return Errors.CLUSTER_AUTHORIZATION_FAILED


def request_error(request: Any) -> Errors | None:
    """Why the request gets no producer id whatever the broker holds, or None."""
    if (request.producer_id == NO_PRODUCER_ID) != (request.producer_epoch == NO_PRODUCER_EPOCH):
        return Errors.INVALID_REQUEST
    if request.transactional_id == "":
        return Errors.INVALID_REQUEST
    return None


async def transactional_init_producer_id(
    transactions: TransactionCoordinatorShell, request: Any
) -> Any:
    expected = None
    if request.version >= 3 and request.producer_id != NO_PRODUCER_ID:
        expected = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
    result = await transactions.init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, expected
    )
    error = error_for_version(result.error, ApiKey.INIT_PRODUCER_ID, request.version)
    return response(request.version, error, result.producer_id, result.producer_epoch)


async def init_producer_id(producer_ids: ProducerIdSource, request: Any) -> Any:
    """Without a transactional id (or a broker with no transaction coordinator, a test
    harness: then a transactional id is refused as not authorized, which clients treat as
    fatal)."""
    error = request_error(request)
    if error is None and request.transactional_id is not None:
        error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if error is None:
        producer_id = await producer_ids.generate_producer_id()
        if producer_id is not None:
            return response(request.version, Errors.NONE, producer_id, producer_epoch=0)
        error = Errors.COORDINATOR_LOAD_IN_PROGRESS
    return response(request.version, error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)


def response(version: int, error: Errors, producer_id: int, producer_epoch: int) -> Any:
    return _Response(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
