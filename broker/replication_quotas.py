"""The broker's two replication throttles (KIP-73) and the leader's use of its own.

``ReplicationQuotas`` holds the leader and follower ``fetcher.replication_quota.ReplicationQuota``
of one broker (Kafka's ``QuotaManagers.leader`` / ``.follower``), sized by the static
``replication.quota.window.num`` / ``replication.quota.window.size.seconds``; ``update`` re-reads
the throttle rates and throttled replicas from each published metadata image (Kafka's
``BrokerConfigHandler`` / ``TopicConfigHandler``). The follower quota is handed to the
``ReplicaFetcherManager``; the leader quota is applied here, to the records a follower fetch
reads (Kafka's ``ReplicaManager.readFromLocalLog`` / ``shouldLeaderThrottle`` and
``KafkaApis.handleFetchRequest``'s ``quotas.leader.record``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from pykraft.fetcher.replication_quota import (
    DEFAULT_WINDOW_NUM,
    DEFAULT_WINDOW_SIZE_MS,
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    ReplicationQuota,
    ThrottledPartitions,
    ThrottleSettings,
    parse_throttled_replicas,
    throttled_bytes,
)
from pykraft.metadata.image import ConfigsImage, MetadataImage
from pykraft.metadata.records import ConfigResourceType
from pykraft.replica.data_path import LogReadResult


def _rate(configs: Mapping[str, str], name: str) -> int | None:
    raw = configs.get(name)
    return int(raw) if raw is not None and raw.strip().lstrip("-").isdigit() else None


def throttle_settings(
    image: MetadataImage, broker_id: int
) -> tuple[ThrottleSettings, ThrottleSettings]:
    """(leader, follower) throttles of ``broker_id`` in ``image`` (Kafka's BrokerConfigHandler
    reads the rates from the broker's own resource; TopicConfigHandler the replica lists)."""
    broker = image.configs.config(ConfigResourceType.BROKER, str(broker_id))
    leader_topics: dict[str, ThrottledPartitions] = {}
    follower_topics: dict[str, ThrottledPartitions] = {}
    for (kind, name), configs in image.configs.resources.items():
        if kind != ConfigResourceType.TOPIC:
            continue
        for key, found in ((LEADER_THROTTLED_REPLICAS, leader_topics),
                           (FOLLOWER_THROTTLED_REPLICAS, follower_topics)):  # fmt: skip
            value = configs.get(key)
            if value:
                throttled = parse_throttled_replicas(value, broker_id)
                if throttled is None or throttled:
                    found[name] = throttled
    return (
        ThrottleSettings(_rate(broker, LEADER_THROTTLED_RATE), leader_topics),
        ThrottleSettings(_rate(broker, FOLLOWER_THROTTLED_RATE), follower_topics),
    )


class ReplicationQuotas:
    def __init__(
        self,
        broker_id: int,
        *,
        window_num: int = DEFAULT_WINDOW_NUM,
        window_size_ms: int = DEFAULT_WINDOW_SIZE_MS,
    ) -> None:
        self.broker_id = broker_id
        self.leader = ReplicationQuota(window_num=window_num, window_size_ms=window_size_ms)
        self.follower = ReplicationQuota(window_num=window_num, window_size_ms=window_size_ms)
        self._configs: ConfigsImage | None = None  # what the settings were last read from

    def update(self, image: MetadataImage) -> None:
        """The throttles of ``image``; its configs are all they come from, so an image whose
        configs are the last one's (a delta that changed none) changes nothing."""
        if image.configs is self._configs:
            return
        self._configs = image.configs
        leader, follower = throttle_settings(image, self.broker_id)
        self.leader.update(leader)
        self.follower.update(follower)

    def should_leader_throttle(
        self, result: LogReadResult, replica_id: int, isr: Sequence[int], now_ms: int
    ) -> bool:
        """Kafka ``shouldLeaderThrottle``: a follower outside the ISR fetching a throttled
        partition while the leader quota is exceeded."""
        return (
            replica_id >= 0
            and replica_id not in isr
            and self.leader.is_throttled(result.topic_partition)
            and self.leader.is_quota_exceeded(now_ms)
        )

    def throttle_leader_read(
        self, result: LogReadResult, replica_id: int, isr: Sequence[int], now_ms: int
    ) -> LogReadResult:
        """The read with its records left out when throttled (offsets and HW still sent)."""
        if result.slices and self.should_leader_throttle(result, replica_id, isr, now_ms):
            return attrs.evolve(result, slices=())
        return result

    def record_leader(self, results: Sequence[LogReadResult], now_ms: int) -> None:
        """After a follower fetch: the bytes sent of throttled partitions count."""
        size = throttled_bytes(self.leader, ((r.topic_partition, r.size_in_bytes) for r in results))
        self.leader.record(size, now_ms)
