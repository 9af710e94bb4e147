"""QuorumController entry points: dispatch, the idle NoOpRecord and the timer deadline."""

from __future__ import annotations

import random

import attrs
import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import FeatureLevelRecord, NoOpRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    BrokerHeartbeatRequest,
    ControllerSettings,
    CreatableTopic,
    CreateTopicsRequest,
    QuorumController,
    not_controller,
)
from pykraft.quorum.managers.elr import ELR_FEATURE
from tests.quorum.helpers import Harness, image_with


def test_noop_after_500_ms_without_writes() -> None:
    # metadata.max.idle.interval.ms (KIP-835): the active controller appends a NoOpRecord so
    # brokers can tell the log is live while nothing happens.
    controller = QuorumController(rng=random.Random(1), now_ms=1000)
    image = attrs.evolve(MetadataImage.EMPTY, offset=0)
    assert controller.maybe_noop(image, 1499) is None
    result = controller.maybe_noop(image, 1500)
    assert result is not None and result.records == (NoOpRecord(),)
    assert controller.maybe_noop(image, 1999) is None
    assert controller.next_deadline_ms(image) == 2000


def test_a_new_cluster_starts_at_its_bootstrap_eligible_leader_replicas_level() -> None:
    # kafka-storage format --feature eligible.leader.replicas.version=1 (KIP-966): the first
    # active controller of an empty metadata log writes that level at once.
    controller = QuorumController(
        rng=random.Random(1),
        now_ms=1000,
        settings=ControllerSettings(eligible_leader_replicas_version=1),
    )
    assert controller.next_deadline_ms(MetadataImage.EMPTY) == 1000
    result = controller.maybe_noop(MetadataImage.EMPTY, 1000)
    assert result is not None
    assert result.records == (FeatureLevelRecord(name=ELR_FEATURE, feature_level=1),)
    # Once written, never again (the log is no longer empty).
    assert controller.maybe_noop(attrs.evolve(MetadataImage.EMPTY, offset=0), 1001) is None
    # pykraft's default is level 0, Kafka 4.0's (see quorum/managers/elr.py): nothing.
    default = QuorumController(rng=random.Random(1), now_ms=1000)
    assert default.maybe_noop(MetadataImage.EMPTY, 1000) is None


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
