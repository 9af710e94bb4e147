"""The client quota core: Kafka's rate math and precedence, mirroring ``ClientQuotaManagerTest``
(``testQuotaViolation``, ``testQuotaParsing``, ``testUserQuotaParsing*``,
``testUserClientIdQuotaParsing*``, ``testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow``)
and ``ClientRequestQuotaManagerTest``'s bounded throttle time."""

from __future__ import annotations

import pytest

from pykraft.broker.quotas import (
    INACTIVE_SENSOR_EXPIRATION_MS,
    MAX_QUOTA_SENSORS,
    MAX_RESOLVED_KEY_CHARS,
    MAX_RESOLVED_QUOTAS,
    ClientQuotaManager,
    QuotaType,
    QuotaWindow,
    quota_limit,
    quota_metric_tags,
    sensor_key,
)
from pykraft.fetcher.sampled_rate import Rate
from pykraft.metadata.client_quotas import (
    ClientQuotasImage,
    entity_data,
    quota_entity,
)
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ClientQuotaRecord

Parts = tuple[tuple[str, str | None], ...]


def image(quotas: dict[Parts, float], key: str = "producer_byte_rate") -> ClientQuotasImage:
    records = [
        ClientQuotaRecord(entity=entity_data(quota_entity(parts)), key=key, value=value)
        for parts, value in quotas.items()
    ]
    return apply_records(MetadataImage.EMPTY, records).client_quotas


U1C1: Parts = (("user", "u1"), ("client-id", "c1"))
U1_DEFAULT_C: Parts = (("user", "u1"), ("client-id", None))
U1: Parts = (("user", "u1"),)
DEFAULT_U_C1: Parts = (("user", None), ("client-id", "c1"))
DEFAULT_U_DEFAULT_C: Parts = (("user", None), ("client-id", None))
DEFAULT_U: Parts = (("user", None),)
C1: Parts = (("client-id", "c1"),)
DEFAULT_C: Parts = (("client-id", None),)
LEVELS = [U1C1, U1_DEFAULT_C, U1, DEFAULT_U_C1, DEFAULT_U_DEFAULT_C, DEFAULT_U, C1, DEFAULT_C]


@pytest.mark.parametrize("first", range(len(LEVELS)))
def test_precedence_is_kafkas_eight_levels(first: int) -> None:
    """With quotas on every level from ``first`` down, level ``first`` applies (its value is
    its level number) to user u1 / client c1."""
    quotas = image(
        {parts: float(level + 1) for level, parts in enumerate(LEVELS) if level >= first}
    )
    tags = quota_metric_tags(quotas, QuotaType.PRODUCE, "u1", "c1")
    assert quota_limit(quotas, QuotaType.PRODUCE, tags) == float(first + 1)


@pytest.mark.parametrize(
    ("quotas", "user", "client_id", "tags"),
    [
        ({}, "u1", "c1", ("", "c1")),
        ({C1: 1.0}, "u1", "c1", ("", "c1")),
        ({U1: 1.0}, "u1", "c1", ("u1", "")),
        ({U1: 1.0}, "u2", "c1", ("", "c1")),
        ({DEFAULT_U: 1.0}, "u2", "c9", ("u2", "")),
        ({U1C1: 1.0}, "u1", "c1", ("u1", "c1")),
        ({U1C1: 1.0}, "u1", "c2", ("", "c2")),
        ({DEFAULT_U_DEFAULT_C: 1.0}, "u7", "c7", ("u7", "c7")),
        ({U1_DEFAULT_C: 1.0, U1: 2.0}, "u1", "c3", ("u1", "c3")),
    ],
)
def test_who_shares_a_rate(
    quotas: dict[Parts, float], user: str, client_id: str, tags: tuple[str, str]
) -> None:
    assert quota_metric_tags(image(quotas), QuotaType.PRODUCE, user, client_id) == tags


def test_a_user_quota_is_shared_by_all_its_clients() -> None:
    """testUserQuotaParsing: every client of u1 records into one rate."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({U1: 1000.0})
    now = 0
    for _ in range(10):
        manager.record_and_get_throttle_time_ms(quotas, "u1", "a", 500.0, now)
        now += 1000
    # a and b each sent 5,000 bytes over 10 s: alone within 1000/s; together at the bound.
    assert manager.record_and_get_throttle_time_ms(quotas, "u1", "b", 6000.0, now) > 0


def test_the_quota_type_reads_its_own_key() -> None:
    quotas = image({C1: 1.0}, key="consumer_byte_rate")
    assert quota_limit(quotas, QuotaType.PRODUCE, ("", "c1")) is None
    assert quota_limit(quotas, QuotaType.FETCH, ("", "c1")) == 1.0


def test_quota_violation() -> None:
    """ClientQuotaManagerTest.testQuotaViolation: 400 B/s for 10 s under a 500 B/s quota, then
    a 2,300-byte spike half a second later: 6,300 B over 10.5 s = 600 B/s, throttled
    (600 - 500) / 500 * 10,500 ms = 2,100 ms; 10 s of 400 B/s later it is forgotten."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 500.0})
    now = 0
    for _ in range(10):
        assert manager.record_and_get_throttle_time_ms(quotas, "ANONYMOUS", "x", 400, now) == 0
        now += 1000
    now += 500
    assert manager.record_and_get_throttle_time_ms(quotas, "ANONYMOUS", "x", 2300, now) == 2100
    assert (manager.throttled_total, manager.throttle_time_ms_total) == (1, 2100)
    now += 2100
    for _ in range(10):
        manager.record_and_get_throttle_time_ms(quotas, "ANONYMOUS", "x", 400, now)
        now += 1000
    assert manager.record_and_get_throttle_time_ms(quotas, "ANONYMOUS", "x", 0, now) == 0


def test_no_quota_records_nothing_and_never_throttles() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    assert manager.record_and_get_throttle_time_ms(image({}), "u", "c", 1e12, 0) == 0
    assert manager.max_value_in_quota_window(image({}), "u", "c") is None


def test_each_image_is_judged_by_its_own_quotas() -> None:
    """The quota a client is held to is worked out once per image: a quota added, changed or
    removed by a later image applies from that image's first request on."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    assert manager.record_and_get_throttle_time_ms(image({}), "u", "c", 1e6, 0) == 0
    assert manager.record_and_get_throttle_time_ms(image({C1: 1e9}), "u", "c", 1e6, 0) == 0
    limited = image({DEFAULT_C: 100.0})
    assert manager.record_and_get_throttle_time_ms(limited, "u", "c", 2000, 0) == 10_000
    assert manager.record_and_get_throttle_time_ms(limited, "u", "c", 1, 0) > 0
    assert manager.record_and_get_throttle_time_ms(image({C1: 100.0}), "u", "c", 2000, 0) == 0
    assert manager.max_value_in_quota_window(image({U1: 10.0}), "u1", "c") == pytest.approx(100.0)


def test_the_quotas_worked_out_per_client_are_bounded() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({C1: 100.0, DEFAULT_C: 1e12})
    for index in range(MAX_RESOLVED_QUOTAS + 10):
        assert manager.record_and_get_throttle_time_ms(quotas, "u", f"c{index}", 1000, 0) == 0
        assert len(manager._resolved) <= MAX_RESOLVED_QUOTAS
    # c1 was forgotten and worked out again: still held to its own 100 B/s.
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c1", 2000, 0) > 0


def test_long_client_ids_are_judged_but_not_kept() -> None:
    """A client id may be 32 KB: such a client is worked out per request, and the memo keeps
    only short pairs, so 1,024 clients with long ids cannot pin 32 MB of ids."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 100.0})
    long_id = "c" * (MAX_RESOLVED_KEY_CHARS + 1)
    assert manager.record_and_get_throttle_time_ms(quotas, "u", long_id, 1000, 0) == 0
    assert manager.record_and_get_throttle_time_ms(quotas, "u", long_id, 1000, 0) == 10_000
    assert manager._resolved == {}
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 1000, 0) == 0
    assert list(manager._resolved) == [("u", "c")]


def test_a_new_client_is_judged_over_the_whole_window() -> None:
    """Rate.windowSize: a first request counts as spread over samples - 1 windows (10 s)."""
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 100.0})
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 1000, 0) == 0
    # 2,000 bytes over 10 s is 200 B/s: (200 - 100) / 100 * 10,000.
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 1000, 0) == 10_000


def test_request_throttle_is_bounded_by_one_window() -> None:
    """ClientRequestQuotaManager: QuotaUtils.boundedThrottleTime caps at the window size."""
    manager = ClientQuotaManager(QuotaType.REQUEST)
    quotas = image({DEFAULT_C: 1.0}, key="request_percentage")
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 500.0, 0) == 1000


def test_unrecord_takes_a_value_back() -> None:
    manager = ClientQuotaManager(QuotaType.FETCH)
    quotas = image({DEFAULT_C: 100.0}, key="consumer_byte_rate")
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 5000, 0) > 0
    manager.unrecord(quotas, "u", "c", 5000, 0)
    assert manager.record_and_get_throttle_time_ms(quotas, "u", "c", 500, 0) == 0


def test_max_value_in_quota_window() -> None:
    """getMaxValueInQuotaWindow: quota * (samples - 1) * window seconds."""
    quotas = image({DEFAULT_C: 100.0})
    assert ClientQuotaManager(QuotaType.PRODUCE).max_value_in_quota_window(
        quotas, "u", "c"
    ) == pytest.approx(1000.0)
    window = QuotaWindow(samples=3, window_ms=2000)
    assert ClientQuotaManager(QuotaType.PRODUCE, window).max_value_in_quota_window(
        quotas, "u", "c"
    ) == pytest.approx(400.0)


def test_samples_older_than_the_window_are_forgotten() -> None:
    rate = Rate(samples=2, window_ms=1000)
    rate.record(1000, 0)
    assert rate.measure(0) == pytest.approx(1000.0)
    assert rate.measure(2000) == 0.0


def test_rates_are_bounded() -> None:
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 100.0})
    for index in range(MAX_QUOTA_SENSORS + 10):
        manager.record_and_get_throttle_time_ms(quotas, "u", f"c{index}", 1, 0)
    assert manager.sensor_count() == MAX_QUOTA_SENSORS


def test_rates_unused_for_an_hour_are_dropped() -> None:
    # ClientQuotaManager.InactiveSensorExpirationTimeSeconds: a client id seen once does not
    # keep its rate for good.
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 100.0})
    for index in range(50):
        manager.record_and_get_throttle_time_ms(quotas, "u", f"c{index}", 1, index)
    assert manager.sensor_count() == 50
    manager.record_and_get_throttle_time_ms(
        quotas, "u", "c49", 1, 49 + INACTIVE_SENSOR_EXPIRATION_MS
    )
    assert manager.sensor_count() == 1  # c0..c48 were idle an hour; c49 was just used


def test_a_rate_costs_the_same_whatever_the_client_ids_size() -> None:
    # A client id may be 32 KB: the rates are kept under a fixed-size digest of the tags.
    manager = ClientQuotaManager(QuotaType.PRODUCE)
    quotas = image({DEFAULT_C: 100.0})
    for index in range(3):
        manager.record_and_get_throttle_time_ms(quotas, "u", str(index) * 32_000, 1, 0)
    assert manager.sensor_count() == 3
    assert {len(key) for key in manager._rates} == {16}
    # Distinct tags never share a rate.
    assert sensor_key(("ab", "c")) != sensor_key(("a", "bc"))
    manager.record_and_get_throttle_time_ms(quotas, "", "x", 1_000_000, 0)
    assert manager.record_and_get_throttle_time_ms(quotas, "", "y", 1, 0) == 0
