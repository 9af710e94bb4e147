"""Producer-id blocks (Kafka's ``ProducerIdControlManager``, KIP-730).

A broker asks for a block; the controller hands out ``[next_producer_id, next_producer_id +
1000)`` and writes a ``ProducerIdsRecord`` whose ``next_producer_id`` is the first id of the
*next* block, so replaying the log never hands the same id out twice, even across failovers.
"""

from __future__ import annotations

from pykraft.metadata.api.brokers import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ProducerIdsRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.cluster_checks import check_broker_epoch
from pykraft.quorum.managers.result import ControllerResult

# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000
_LONG_MAX = 2**63 - 1


def allocate_producer_ids(
    image: MetadataImage, request: AllocateProducerIdsRequest
) -> ControllerResult[AllocateProducerIdsResponse]:
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error.is_failure():
        return ControllerResult((), AllocateProducerIdsResponse(error))
    # An image that never allocated says -1: the first block starts at 0.
    first = max(image.producer_ids.next_producer_id, 0)
    if first > _LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
        return ControllerResult(
            (),
            AllocateProducerIdsResponse(
                ApiError.of(Errors.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
            ),
        )
    record = ProducerIdsRecord(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        next_producer_id=first + PRODUCER_ID_BLOCK_SIZE,
    )
    return ControllerResult(
        (record,),
        AllocateProducerIdsResponse(
            SUCCESS, producer_id_start=first, producer_id_len=PRODUCER_ID_BLOCK_SIZE
        ),
    )
