"""Checks on broker registrations shared by several managers."""

from __future__ import annotations

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.errors import Errors


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> ApiError:
    """Kafka's ``ClusterControlManager.checkBrokerEpoch``: STALE_BROKER_EPOCH on mismatch."""
    registration = image.cluster.brokers.get(broker_id)
    if registration is None:
        return ApiError.of(
            Errors.STALE_BROKER_EPOCH, f"No broker registration found for broker id {broker_id}"
        )
    if registration.epoch != broker_epoch:
        return ApiError.of(
            Errors.STALE_BROKER_EPOCH,
            f"Expected broker epoch {registration.epoch}, but got broker epoch {broker_epoch}",
        )
    return SUCCESS
