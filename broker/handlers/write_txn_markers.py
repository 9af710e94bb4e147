"""WriteTxnMarkers (v1): a transaction coordinator asks this broker, as leader, to end a
transaction on some of its partitions (Kafka's ``KafkaApis.handleWriteTxnMarkersRequest``).

Only brokers may: CLUSTER_ACTION on the cluster, else every partition answers
CLUSTER_AUTHORIZATION_FAILED. Each marker becomes a control batch appended as leader with the
coordinator's origin and acks=-1 (``ReplicaManager.append_txn_markers``, which answers
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED... per partition). A marker written to a ``__consumer_offsets``
partition also ends the producer's pending transactional offset commits there, committed or
dropped (``GroupCoordinator.onTransactionCompleted``): the group coordinator is told once the
marker is in the log; if telling it fails the partition answers UNKNOWN_SERVER_ERROR and the
transaction coordinator retries.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.errors import Errors
from pykraft.protocol.txn_markers import (
    MarkerResults,
    write_txn_markers_request,
    write_txn_markers_response,
)
from pykraft.storage.txn_markers import TxnMarker

logger = logging.getLogger(__name__)

# request.timeout.ms: how long a marker's append may wait for the ISR.
MARKER_APPEND_TIMEOUT_MS = 30_000


def write_txn_markers_handler(
    services: BrokerServices, groups: GroupCoordinatorShell | None
) -> ApiHandler:
    async def handle(context: RequestContext, request: Any) -> Any:
        markers = write_txn_markers_request(request)
        if not services.authorizer.authorize_cluster(context, AclOperation.CLUSTER_ACTION):
            refused: MarkerResults = {
                (marker.producer_id, tp): Errors.CLUSTER_AUTHORIZATION_FAILED
                for marker in markers
                for tp in marker.partitions
            }
            return write_txn_markers_response(request.version, refused)
        results = await services.replica_manager.append_txn_markers(
            markers, timeout_ms=MARKER_APPEND_TIMEOUT_MS, now_ms=services.wall_clock_ms()
        )
        if groups is not None:
            complete_offsets_transactions(groups, markers, results)
        return write_txn_markers_response(request.version, results)

    return kafka_python_handler(handle)


def complete_offsets_transactions(
    groups: GroupCoordinatorShell, markers: Sequence[TxnMarker], results: MarkerResults
) -> None:
    """Tell the group coordinator of every marker now in a ``__consumer_offsets`` partition
    (``onTransactionCompleted``). Should that fail, the partition answers UNKNOWN_SERVER_ERROR,
    as Kafka's does, and the coordinator resends the marker."""
    for marker in markers:
        for tp in marker.partitions:
            key = (marker.producer_id, tp)
            if tp.topic != OFFSETS_TOPIC or results.get(key) is not Errors.NONE:
                continue
            try:
                groups.complete_transaction(tp.partition, marker.producer_id, marker.commit)
            except Exception:
                logger.exception("completing producer %d's offsets in %s", marker.producer_id, tp)
                results[key] = Errors.UNKNOWN_SERVER_ERROR
