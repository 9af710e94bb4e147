"""The controller's ``GET /metrics`` (``quorum/metrics.py``): Kafka's ``KafkaController`` gauges
and ``raft-metrics`` in the JMX exporter's names, computed from the image and the Raft state.

Counts follow Kafka's ``ControllerMetadataMetricsPublisher`` / ``ControllerMetricsChanges``:
a partition without a leader is offline and (not having its preferred leader) imbalanced; a
partition led by a replica other than its first is imbalanced only.
"""

from __future__ import annotations

import math

import pytest

from pykraft.metadata.image import MetadataImage
from pykraft.quorum.metrics import (
    COMMIT_LATENCY_WINDOW_MS,
    CommitLatency,
    ControllerMetrics,
    ControllerSnapshot,
)
from tests.broker.test_metrics import parse
from tests.quorum.helpers import image_with

IMAGE = image_with(
    {1: "unfenced", 2: "unfenced", 3: "fenced"},
    {
        # (replicas, isr, leader) per partition
        "orders": [((1, 2), (1, 2), 1), ((2, 1), (2, 1), 1), ((1, 2), (1,), -1)],
        "audit": [((2,), (2,), 2)],
    },
)


def snapshot(**changes: object) -> ControllerSnapshot:
    values: dict[str, object] = {
        "image": IMAGE,
        "active": True,
        "leader_id": 2,
        "raft_term": 7,
        "raft_state": "leader",
        "committed_offset": 41,
    } | changes
    return ControllerSnapshot(**values)  # type: ignore[arg-type]


def values(text: str) -> dict[str, float]:
    return {
        name + "".join(f"{{{k}={v}}}" for k, v in sorted(labels.items())): value
        for family in parse(text).values()
        for name, labels, value in family["samples"]
    }


def test_the_active_controllers_gauges() -> None:
    got = values(ControllerMetrics().render(snapshot(), now_ms=1_000))
    controller = "kafka_controller_kafkacontroller_"
    assert {k: v for k, v in got.items() if k.startswith(controller)} == {
        controller + "activecontrollercount": 1,
        controller + "offlinepartitionscount": 1,
        controller + "globalpartitioncount": 4,
        controller + "globaltopiccount": 2,
        controller + "preferredreplicaimbalancecount": 2,  # orders-1 (led by 1) and orders-2
        controller + "activebrokercount": 2,
        controller + "fencedbrokercount": 1,
        controller + "lastappliedrecordoffset": IMAGE.offset,
        controller + "lastcommittedrecordoffset": 41,
    }
    raft = "kafka_server_raftmetrics_"
    assert got[raft + "current_leader"] == 2
    assert got[raft + "current_epoch"] == 7
    assert got[raft + "high_watermark"] == 42  # the committed end offset
    assert got[raft + "current_state{current_state=leader}"] == 1
    assert got[raft + "current_state{current_state=follower}"] == 0
    assert math.isnan(got[raft + "commit_latency_avg"])  # no commit yet: NaN, as Kafka's Avg


def test_a_follower_without_a_known_leader() -> None:
    text = ControllerMetrics().render(
        snapshot(active=False, leader_id=None, raft_term=None, raft_state="unattached"), 0
    )
    got = values(text)
    assert got["kafka_controller_kafkacontroller_activecontrollercount"] == 0
    assert got["kafka_server_raftmetrics_current_leader"] == -1
    assert got["kafka_server_raftmetrics_current_epoch"] == -1
    assert got["kafka_server_raftmetrics_current_state{current_state=unattached}"] == 1
    assert got["kafka_server_raftmetrics_current_state{current_state=leader}"] == 0


def test_an_empty_cluster() -> None:
    got = values(
        ControllerMetrics().render(snapshot(image=MetadataImage.EMPTY, committed_offset=-1), 0)
    )
    assert got["kafka_controller_kafkacontroller_globalpartitioncount"] == 0
    assert got["kafka_controller_kafkacontroller_offlinepartitionscount"] == 0
    assert got["kafka_server_raftmetrics_high_watermark"] == -1


def test_commit_latency_is_averaged_and_maxed_over_the_window() -> None:
    latency = CommitLatency()
    latency.record(4.0, now_ms=1_000)
    latency.record(10.0, now_ms=2_000)
    latency.record(1.0, now_ms=3_000)
    assert latency.average_ms(3_000) == 5.0 and latency.max_ms(3_000) == 10.0
    # 60 s later the first two have left the window (Kafka: 2 samples of 30 s).
    assert latency.max_ms(2_000 + COMMIT_LATENCY_WINDOW_MS) == 1.0
    assert math.isnan(latency.average_ms(3_000 + COMMIT_LATENCY_WINDOW_MS))
    with pytest.raises(AssertionError):
        latency.record(-1.0, now_ms=5_000)


def test_commit_latency_renders_once_recorded() -> None:
    metrics = ControllerMetrics()
    metrics.commit_latency.record(3.0, now_ms=10)
    metrics.commit_latency.record(5.0, now_ms=20)
    got = values(metrics.render(snapshot(), now_ms=30))
    assert got["kafka_server_raftmetrics_commit_latency_avg"] == 4.0
    assert got["kafka_server_raftmetrics_commit_latency_max"] == 5.0
