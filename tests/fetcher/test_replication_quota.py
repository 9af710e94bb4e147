"""Replication throttles (KIP-73): Kafka's ReplicationQuotaManagerTest
(shouldThrottleOnlyDefinedReplicas, shouldSupportWildcardThrottledReplicas,
shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses) and TopicConfigHandler's parsing of the
throttled-replica lists, over the pure ``fetcher.replication_quota`` core (the settings read
from an image by ``broker.replication_quotas``)."""

from __future__ import annotations

import pytest

from pykraft.broker.replication_quotas import throttle_settings
from pykraft.fetcher.replication_quota import (
    ReplicationQuota,
    ThrottleSettings,
    parse_throttled_replicas,
    throttled_bytes,
)
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.storage.topic_partition import TopicPartition
from tests.quorum.helpers import apply, image_with


def test_only_defined_replicas_are_throttled() -> None:
    quota = ReplicationQuota()
    quota.update(ThrottleSettings(topics={"topic1": frozenset({1, 2, 3})}))
    assert quota.is_throttled(TopicPartition("topic1", 1))
    assert quota.is_throttled(TopicPartition("topic1", 3))
    assert not quota.is_throttled(TopicPartition("topic1", 4))
    assert not quota.is_throttled(TopicPartition("topic2", 1))


def test_wildcard_throttles_every_partition_of_the_topic() -> None:
    quota = ReplicationQuota()
    quota.update(ThrottleSettings(topics={"MyTopic": None}))
    assert quota.is_throttled(TopicPartition("MyTopic", 0))
    assert quota.is_throttled(TopicPartition("MyTopic", 99))
    assert not quota.is_throttled(TopicPartition("MyOtherTopic", 0))


def test_exceed_the_quota_then_fall_back_below_as_time_passes() -> None:
    # shouldExceedQuotaThenReturnBackBelowBoundAsTimePasses: 10 samples of 1 s, 100 B/s.
    quota = ReplicationQuota(window_num=10, window_size_ms=1000)
    quota.update(ThrottleSettings(rate=100))
    now = 0
    assert not quota.is_quota_exceeded(now)  # the first measurement opens the first sample
    now += 1500
    quota.record(1, now)
    assert not quota.is_quota_exceeded(now)
    quota.record(149, now)  # 150 B over 1.5 s
    assert not quota.is_quota_exceeded(now)
    quota.record(1, now)  # 151 B over 1.5 s
    assert quota.rate(now) == pytest.approx(151 / 1.5)
    assert quota.is_quota_exceeded(now)
    assert 0 < quota.ms_until_within_quota(now) <= 10
    now += 500  # 151 B over 2 s
    assert not quota.is_quota_exceeded(now)
    assert quota.rate(now) == pytest.approx(151 / 2)
    now += 500
    quota.record(99, now)  # 250 B over 2.5 s
    assert quota.rate(now) == pytest.approx(250 / 2.5)
    assert not quota.is_quota_exceeded(now)
    quota.record(1, now)
    assert quota.is_quota_exceeded(now)
    now += 2000
    assert not quota.is_quota_exceeded(now)
    assert quota.rate(now) == pytest.approx(251 / 4.5)
    assert quota.total_bytes == 251


def test_old_samples_expire_and_a_fresh_quota_admits_one_window() -> None:
    quota = ReplicationQuota(window_num=2, window_size_ms=1000)
    quota.update(ThrottleSettings(rate=1000))
    quota.record(1000, 0)
    assert not quota.is_quota_exceeded(0)  # one window's worth at once (SimpleRate)
    quota.record(1, 0)
    assert quota.is_quota_exceeded(0)
    assert quota.ms_until_within_quota(0) == 1
    assert quota.rate(5000) == 0  # both windows long gone
    unbounded = ReplicationQuota()
    unbounded.record(10**9, 0)
    assert not unbounded.is_quota_exceeded(0)


@pytest.mark.parametrize(
    ("value", "broker", "expected"),
    [
        ("*", 1, None),
        (" * ", 1, None),
        ("0:1,1:2,2:1", 1, frozenset({0, 2})),
        ("0:1, 1:2", 2, frozenset({1})),
        ("0:1", 3, frozenset()),
        ("", 1, frozenset()),
    ],
)
def test_parse_throttled_replicas(value: str, broker: int, expected: object) -> None:
    assert parse_throttled_replicas(value, broker) == expected


def test_settings_come_from_the_brokers_own_rates_and_every_topics_lists() -> None:
    image = image_with({10: "unfenced", 11: "unfenced"}, {"foo": [((10, 11), (10, 11), 10)]})
    topic, broker = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
    settings = [
        (broker, "10", "leader.replication.throttled.rate", "1000"),
        (broker, "11", "follower.replication.throttled.rate", "7"),
        (topic, "foo", "leader.replication.throttled.replicas", "0:10,0:11"),
        (topic, "foo", "follower.replication.throttled.replicas", "0:12"),
        (topic, "bar", "follower.replication.throttled.replicas", "*"),
    ]
    image = apply(
        image,
        [
            ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value)
            for kind, name, key, value in settings
        ],
    )
    leader, follower = throttle_settings(image, 10)
    assert leader == ThrottleSettings(1000, {"foo": frozenset({0})})
    assert follower == ThrottleSettings(None, {"bar": None})
    leader, follower = throttle_settings(image, 11)
    assert (leader.rate, follower.rate) == (None, 7)


def test_only_throttled_partitions_bytes_count() -> None:
    quota = ReplicationQuota()
    quota.update(ThrottleSettings(topics={"foo": frozenset({0})}))
    sizes = [(TopicPartition("foo", 0), 100), (TopicPartition("foo", 1), 50)]
    assert throttled_bytes(quota, sizes) == 100


def test_reading_the_rate_does_not_start_the_measurement() -> None:
    # The metrics read rate(); only the quota check opens the first sample, so idle time
    # before a throttled copy starts is not credited to it.
    quota = ReplicationQuota(window_num=11, window_size_ms=1000)
    quota.update(ThrottleSettings(rate=1000))
    assert quota.rate(0) == 0
    assert not quota.is_quota_exceeded(5000)  # the measurement starts here
    quota.record(1500, 5000)
    assert quota.is_quota_exceeded(5000)  # 1500 B over one window, not over 5 s
