"""The controller's metrics in Kafka's names: ``GET /metrics`` on the controller's HTTP port.

Pure: ``ControllerMetrics.render(snapshot, now_ms)`` turns one ``ControllerSnapshot`` — the
controller's image, its Raft state, whether it is active — into Prometheus text; the shell
(``quorum/service_metrics.py``) takes the snapshot and the time. ``CommitLatency`` is fed by the
write path with each committed proposal's latency.

Names, as the Prometheus JMX exporter's Kafka rules give them:
- ``kafka.controller:type=KafkaController,name=X`` gauges (Kafka's ``QuorumControllerMetrics``
  and ``ControllerMetadataMetrics``) → ``kafka_controller_kafkacontroller_<x>``
  (``kafka-2_0_0.yml``, lower-cased): ActiveControllerCount (1 on the active controller),
  OfflinePartitionsCount (partitions without a leader), GlobalPartitionCount, GlobalTopicCount,
  PreferredReplicaImbalanceCount (no leader, or one other than the first replica),
  ActiveBrokerCount, FencedBrokerCount, LastAppliedRecordOffset, LastCommittedRecordOffset;
- Kafka's ``RaftMetrics`` (``kafka.server:type=raft-metrics``, attributes ``current-leader``,
  ``current-epoch``, ``high-watermark``, ``current-state``, ``commit-latency-avg``/``-max``) →
  ``kafka_server_raftmetrics_<attribute with - as _>`` (the kafka-kraft rules: ``current_state``
  is 1 with the state as a label). Kafka's ``current-epoch`` is the Raft term here (pysyncobj's
  ``raft_term``) and ``high-watermark`` the metadata log's committed end offset, since metadata
  offsets, not Raft indexes, are the log's offsets (DESIGN.md §3.1). Commit latency is averaged
  and maxed over ``COMMIT_LATENCY_WINDOW_MS``, Kafka's two 30 s samples
  (``metrics.sample.window.ms``, ``metrics.num.samples``); NaN with no commit in it.
"""

from __future__ import annotations

import math
from collections import deque

import attrs

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.prometheus import Gauge, MetricsRegistry
from pykraft.metadata.records import NO_LEADER

COMMIT_LATENCY_WINDOW_MS = 60_000
# Commits remembered for the window; past it the oldest are forgotten early (a bound, never hit
# at the controller's ~1,000 commits/s for more than the window's tail).
MAX_COMMIT_SAMPLES = 65_536
RAFT_STATES = ("leader", "candidate", "follower", "unattached")


@attrs.frozen(kw_only=True)
class ControllerSnapshot:
    image: MetadataImage
    active: bool
    # The quorum's leader as this controller knows it (None: none known).
    leader_id: int | None
    raft_term: int | None
    # pysyncobj's state: "leader", "candidate" or "follower" ("unattached" when unknown).
    raft_state: str
    # The metadata log's last committed record offset (-1 before any).
    committed_offset: int


class CommitLatency:
    """Each committed proposal's latency (ms) with when it committed (monotonic ms)."""

    def __init__(self, window_ms: int = COMMIT_LATENCY_WINDOW_MS) -> None:
        self.window_ms = window_ms
        # Invariant: committed_ms is non-decreasing from oldest to newest.
        self._samples: deque[tuple[int, float]] = deque(maxlen=MAX_COMMIT_SAMPLES)

    def record(self, latency_ms: float, now_ms: int) -> None:
        assert latency_ms >= 0
        assert not self._samples or self._samples[-1][0] <= now_ms, "time went backwards"
        self._samples.append((now_ms, latency_ms))

    def _recent(self, now_ms: int) -> list[float]:
        while self._samples and self._samples[0][0] <= now_ms - self.window_ms:
            self._samples.popleft()
        return [latency for _, latency in self._samples]

    def average_ms(self, now_ms: int) -> float:
        recent = self._recent(now_ms)
        return sum(recent) / len(recent) if recent else math.nan

    def max_ms(self, now_ms: int) -> float:
        recent = self._recent(now_ms)
        return max(recent) if recent else math.nan


class ControllerMetrics:
    """The controller's families; ``render`` sets every gauge from one snapshot."""

    def __init__(self) -> None:
        self.commit_latency = CommitLatency()
        self.registry = MetricsRegistry()

        def gauge(name: str, help_text: str, *label_names: str) -> Gauge:
            """A gauge registered as it is made: rendered in the order made, none forgotten."""
            family = Gauge(name, help_text, label_names)
            self.registry.register(family)
            return family

        controller = "kafka_controller_kafkacontroller_"
        raft = "kafka_server_raftmetrics_"
        self.active_controller = gauge(
            controller + "activecontrollercount",
            "1 on the active controller, else 0 (KafkaController ActiveControllerCount).",
        )
        self.offline_partitions = gauge(
            controller + "offlinepartitionscount",
            "Partitions without a leader (KafkaController OfflinePartitionsCount).",
        )
        self.global_partitions = gauge(
            controller + "globalpartitioncount",
            "Partitions in the cluster (KafkaController GlobalPartitionCount).",
        )
        self.global_topics = gauge(
            controller + "globaltopiccount",
            "Topics in the cluster (KafkaController GlobalTopicCount).",
        )
        self.preferred_imbalance = gauge(
            controller + "preferredreplicaimbalancecount",
            "Partitions led by a replica other than the first (KafkaController "
            "PreferredReplicaImbalanceCount).",
        )
        self.active_brokers = gauge(
            controller + "activebrokercount",
            "Registered unfenced brokers (KafkaController ActiveBrokerCount).",
        )
        self.fenced_brokers = gauge(
            controller + "fencedbrokercount",
            "Registered fenced brokers (KafkaController FencedBrokerCount).",
        )
        self.last_applied = gauge(
            controller + "lastappliedrecordoffset",
            "Offset of the last metadata record in this controller's image "
            "(KafkaController LastAppliedRecordOffset).",
        )
        self.last_committed = gauge(
            controller + "lastcommittedrecordoffset",
            "Offset of the last committed metadata record (KafkaController "
            "LastCommittedRecordOffset).",
        )
        self.current_leader = gauge(
            raft + "current_leader",
            "The quorum leader's node id, -1 when none is known (raft-metrics current-leader).",
        )
        self.current_epoch = gauge(
            raft + "current_epoch",
            "The Raft term (raft-metrics current-epoch).",
        )
        self.high_watermark = gauge(
            raft + "high_watermark",
            "The metadata log's committed end offset, -1 before any record "
            "(raft-metrics high-watermark).",
        )
        self.current_state = gauge(
            raft + "current_state",
            "1 for this controller's Raft state (raft-metrics current-state).",
            "current_state",
        )
        self.commit_latency_avg = gauge(
            raft + "commit_latency_avg",
            "Average milliseconds from proposing a metadata batch to its commit, over the last "
            "60 s (raft-metrics commit-latency-avg).",
        )
        self.commit_latency_max = gauge(
            raft + "commit_latency_max",
            "Largest commit latency in milliseconds over the last 60 s "
            "(raft-metrics commit-latency-max).",
        )

    def render(self, snapshot: ControllerSnapshot, now_ms: int) -> str:
        self._set_image_gauges(snapshot.image)
        self.active_controller.set(1 if snapshot.active else 0)
        self.last_committed.set(snapshot.committed_offset)
        self.current_leader.set(-1 if snapshot.leader_id is None else snapshot.leader_id)
        self.current_epoch.set(-1 if snapshot.raft_term is None else snapshot.raft_term)
        self.high_watermark.set(
            -1 if snapshot.committed_offset < 0 else snapshot.committed_offset + 1
        )
        state = snapshot.raft_state if snapshot.raft_state in RAFT_STATES else "unattached"
        for name in RAFT_STATES:
            self.current_state.set(1 if name == state else 0, name)
        self.commit_latency_avg.set(self.commit_latency.average_ms(now_ms))
        self.commit_latency_max.set(self.commit_latency.max_ms(now_ms))
        return self.registry.render()

    def _set_image_gauges(self, image: MetadataImage) -> None:
        partitions = offline = imbalanced = 0
        for topic in image.topics.by_name.values():
            for registration in topic.partitions.values():
                partitions += 1
                # ControllerMetadataMetrics: !hasLeader() is offline; !hasPreferredLeader()
                # (leader other than the first replica, none included) is imbalanced.
                offline += registration.leader == NO_LEADER
                imbalanced += registration.leader != registration.replicas[0]
        brokers = list(image.cluster.brokers.values())
        fenced = sum(1 for broker in brokers if broker.fenced)
        self.global_topics.set(len(image.topics.by_name))
        self.global_partitions.set(partitions)
        self.offline_partitions.set(offline)
        self.preferred_imbalance.set(imbalanced)
        self.fenced_brokers.set(fenced)
        self.active_brokers.set(len(brokers) - fenced)
        self.last_applied.set(image.offset)
