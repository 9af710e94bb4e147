"""Replication throttles (KIP-73): Kafka's ``ReplicationQuotaManager``, as a clock-free core.

Theory of operation. A broker keeps two quotas, one per side of replication. The *leader* quota
bounds the bytes this broker serves to followers of throttled partitions; the *follower* quota
bounds the bytes its fetchers pull for throttled partitions. Each has

* a bound in bytes/s — the broker's own dynamic config ``leader.replication.throttled.rate`` /
  ``follower.replication.throttled.rate`` (unset: unbounded; Kafka's default Long.MaxValue);
* the throttled partitions of this broker — from each topic's
  ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
  ``*`` (every partition) or ``partition:broker`` entries, of which only this broker's count
  (Kafka's ``TopicConfigHandler.parseThrottledPartitions``);
* a measured rate (``fetcher/sampled_rate.SimpleRate``, Kafka's ``SimpleRate`` over a
  ``SampledStat``, which ReplicationQuotaManager uses so that a fresh quota admits one window's
  worth of bytes, not ``Rate``'s ten): ``replication.quota.window.num`` samples of
  ``replication.quota.window.size.seconds``; the first check of the bound opens a sample.

The quota is *exceeded* while the measured rate is above the bound. Then the leader leaves
throttled partitions out of the records it sends a follower not in the ISR
(``ReplicaManager.shouldLeaderThrottle``), and a fetcher leaves throttled partitions of a replica
not caught up out of its next Fetch (``ReplicaFetcherThread.shouldFollowerThrottle``). Both sides
``record`` the bytes of throttled partitions they moved. In-sync replicas are never throttled:
the throttle slows the copy of a reassignment, never the replication that acks=all waits for.

Everything takes ``now_ms``; nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import attrs

from pykraft.fetcher.sampled_rate import SimpleRate
from pykraft.storage.topic_partition import TopicPartition

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
ALL_REPLICAS = "*"
DEFAULT_WINDOW_NUM = 11  # replication.quota.window.num
DEFAULT_WINDOW_SIZE_MS = 1000  # replication.quota.window.size.seconds

# A topic's throttled partitions on this broker; None: every partition ("*").
ThrottledPartitions = frozenset[int] | None


@attrs.frozen
class ThrottleSettings:
    """One side's throttle as the metadata sets it for one broker."""

    # bytes/s; None: unbounded.
    rate: int | None = None
    topics: Mapping[str, ThrottledPartitions] = attrs.field(factory=dict)


def parse_throttled_replicas(value: str, broker_id: int) -> ThrottledPartitions:
    """The partitions ``value`` throttles on ``broker_id`` (malformed entries are skipped: the
    controller validated the config when it was set)."""
    if value.strip() == ALL_REPLICAS:
        return None
    partitions = set()
    for entry in value.split(","):
        partition, _, broker = entry.strip().partition(":")
        if partition.isdigit() and broker.isdigit() and int(broker) == broker_id:
            partitions.add(int(partition))
    return frozenset(partitions)


class ReplicationQuota:
    """Kafka's ``ReplicationQuotaManager`` for one side (leader or follower)."""

    def __init__(
        self, *, window_num: int = DEFAULT_WINDOW_NUM, window_size_ms: int = DEFAULT_WINDOW_SIZE_MS
    ) -> None:
        self.window_num = window_num
        self.window_size_ms = window_size_ms
        self.settings = ThrottleSettings()
        self._rate = SimpleRate(samples=window_num, window_ms=window_size_ms)
        # Every byte recorded since start (the broker's metrics).
        self.total_bytes = 0

    def update(self, settings: ThrottleSettings) -> None:
        self.settings = settings

    def is_throttled(self, topic_partition: TopicPartition) -> bool:
        """Kafka's ``isThrottled``: the partition is in this side's throttled list."""
        topics = self.settings.topics
        if topic_partition.topic not in topics:
            return False
        throttled = topics[topic_partition.topic]
        return throttled is None or topic_partition.partition in throttled

    def record(self, size_bytes: int, now_ms: int) -> None:
        """Count ``size_bytes`` moved now (Kafka's ``SampledStat.record``: a sample a window
        old is complete and a new one begins at ``now_ms``)."""
        if size_bytes <= 0:
            return
        self.total_bytes += size_bytes
        self._rate.record(size_bytes, now_ms)

    def rate(self, now_ms: int) -> float:
        """Measured bytes/s (Kafka's ``SimpleRate.measure``); a read: it opens no sample, so
        looking at the metrics does not change what the quota admits."""
        return self._rate.measure(now_ms)

    def is_quota_exceeded(self, now_ms: int) -> bool:
        """The rate is above the bound. The first check opens the first sample (Kafka's
        ``SampledStat.oldest(now)``), so a quota measures from when it is first consulted."""
        bound = self.settings.rate
        if bound is None:
            return False
        self._rate.open(now_ms)
        return self.rate(now_ms) > bound

    def ms_until_within_quota(self, now_ms: int) -> int:
        """How long until the measured rate falls to the bound with no more bytes (an upper
        bound: samples expiring meanwhile only shorten it); 0 when not exceeded."""
        bound = self.settings.rate
        if bound is None or not self.is_quota_exceeded(now_ms):
            return 0
        if bound == 0:
            return self.window_num * self.window_size_ms
        total = self._rate.total(now_ms)
        return max(0, math.ceil(total * 1000 / bound - self._rate.window_size_ms(now_ms)))


def throttled_bytes(quota: ReplicationQuota, sizes: Iterable[tuple[TopicPartition, int]]) -> int:
    """Kafka's ``sizeOfThrottledPartitions``: the bytes of the throttled partitions only."""
    return sum(size for tp, size in sizes if quota.is_throttled(tp))
