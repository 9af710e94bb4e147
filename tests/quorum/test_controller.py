"""QuorumController entry points: dispatch, the idle NoOpRecord and the timer deadline."""

from __future__ import annotations

import random

import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import NoOpRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    BrokerHeartbeatRequest,
    ControllerSettings,
    CreatableTopic,
    CreateTopicsRequest,
    QuorumController,
    not_controller,
)
from tests.quorum.helpers import Harness, image_with


def test_noop_after_500_ms_without_writes() -> None:
    # metadata.max.idle.interval.ms (KIP-835): the active controller appends a NoOpRecord so
    # brokers can tell the log is live while nothing happens.
    controller = QuorumController(rng=random.Random(1), now_ms=1000)
    image = MetadataImage.EMPTY
    assert controller.maybe_noop(image, 1499) is None
    result = controller.maybe_noop(image, 1500)
    assert result is not None and result.records == (NoOpRecord(),)
    assert controller.maybe_noop(image, 1999) is None
    assert controller.next_deadline_ms(image) == 2000


def test_writes_postpone_the_noop() -> None:
    h = Harness(image_with({1: "unfenced"}), now_ms=0)
    h.now_ms = 400
    h.run(CreateTopicsRequest((CreatableTopic("t", 1, 1),)))
    assert h.controller.maybe_noop(h.image, 899) is None
    assert h.controller.maybe_noop(h.image, 900) is not None


def test_next_deadline_is_the_earliest_session_expiry_or_noop() -> None:
    settings = ControllerSettings(metadata_max_idle_interval_ms=60_000)
    h = Harness(image_with({1: "unfenced", 2: "fenced"}), now_ms=100, settings=settings)
    assert h.controller.next_deadline_ms(h.image) == 100 + 9000 + 1
    h.now_ms = 5000
    h.run(BrokerHeartbeatRequest(broker_id=1, broker_epoch=0, current_metadata_offset=0))
    assert h.controller.next_deadline_ms(h.image) == 5000 + 9000 + 1


def test_handle_rejects_unknown_requests() -> None:
    controller = QuorumController(rng=random.Random(1), now_ms=0)
    with pytest.raises(TypeError, match="not a controller request: str"):
        controller.handle(MetadataImage.EMPTY, "hello", 0)  # type: ignore[arg-type]


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="broker_session_timeout_ms must be positive"):
        ControllerSettings(broker_session_timeout_ms=0)


def test_not_controller_error() -> None:
    error = not_controller()
    assert (error.error, error.code, error.name) == (Errors.NOT_CONTROLLER, 41, "NOT_CONTROLLER")
    assert error.message == "This is not the correct controller for this cluster."
