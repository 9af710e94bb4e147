"""Producer-id blocks, following Kafka's ProducerIdControlManagerTest (KIP-730)."""

from __future__ import annotations

from pykraft.metadata.records import ProducerIdsRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import AllocateProducerIdsRequest
from pykraft.quorum.managers.producer_ids import allocate_producer_ids
from tests.quorum.helpers import Harness, apply, image_with


def test_blocks_of_1000_from_zero() -> None:
    # ProducerIdControlManagerTest.testInitialResult / testMonotonic
    h = Harness(image_with({1: "unfenced", 2: "unfenced"}))
    first = h.controller.allocate_producer_ids(h.image, AllocateProducerIdsRequest(1, 0), 0)
    assert first.records == (ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000),)
    assert (first.response.producer_id_start, first.response.producer_id_len) == (0, 1000)
    h.commit(first)
    second = h.run(AllocateProducerIdsRequest(2, 1))
    assert (second.producer_id_start, second.producer_id_len) == (1000, 1000)
    assert h.image.producer_ids.next_producer_id == 2000


def test_stale_broker_epoch() -> None:
    # ProducerIdControlManagerTest.testUnknownBrokerOrEpoch
    h = Harness(image_with({1: "unfenced"}))
    for request in (AllocateProducerIdsRequest(1, 5), AllocateProducerIdsRequest(9, 0)):
        result = h.controller.allocate_producer_ids(h.image, request, 0)
        assert result.records == ()
        assert result.response.error.error is Errors.STALE_BROKER_EPOCH


def test_exhausted() -> None:
    # ProducerIdControlManagerTest.testMaxValue
    image = image_with({1: "unfenced"})
    image = apply(
        image, [ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=2**63 - 1000)]
    )
    result = allocate_producer_ids(image, AllocateProducerIdsRequest(1, 0))
    assert result.records == ()
    assert (result.response.error.error, result.response.error.message) == (
        Errors.UNKNOWN_SERVER_ERROR,
        "Exhausted all producerIds.",
    )
