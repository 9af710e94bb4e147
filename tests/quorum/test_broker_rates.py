"""The active controller's per-broker rates from heartbeat counters (``quorum/broker_rates.py``):
samples in, rates out, no clock, no server."""

from __future__ import annotations

from pykraft.metadata.api.brokers import BrokerTopicCounters
from pykraft.quorum.broker_rates import MIN_RATE_WINDOW_MS, BrokerRates, HeartbeatRates

MAX_AGE_MS = 9_000
EPOCH = 17


def counters(messages_in: int, bytes_out: int = 0) -> BrokerTopicCounters:
    return BrokerTopicCounters(
        messages_in=messages_in,
        bytes_in=10 * messages_in,
        bytes_out=bytes_out,
        replication_bytes_in=1,
        replication_bytes_out=2,
        fetch_requests=bytes_out // 100,
    )


def rates_after(*beats: tuple[int, int, BrokerTopicCounters | None], now_ms: int) -> object:
    """Broker 1's rates at ``now_ms`` after heartbeats of (received_ms, broker_epoch, counters)."""
    rates = HeartbeatRates()
    for received_ms, broker_epoch, sent in beats:
        rates.handle_heartbeat(1, broker_epoch, sent, received_ms)
    return rates.rates(1, now_ms, MAX_AGE_MS)


def test_the_rate_is_the_growth_between_the_last_two_heartbeats() -> None:
    found = rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH, counters(150, bytes_out=1_000)),
        (5_000, EPOCH, counters(170, bytes_out=5_000)),
        now_ms=5_500,
    )
    assert found == BrokerRates(
        messages_in=10.0,
        bytes_in=100.0,
        bytes_out=2_000.0,
        replication_bytes_in=0.0,
        replication_bytes_out=0.0,
        fetch_requests=20.0,
    )


def test_no_rate_without_two_samples() -> None:
    assert rates_after(now_ms=0) is None
    assert rates_after((1_000, EPOCH, counters(5)), now_ms=1_000) is None


def test_a_restarted_broker_starts_over_and_never_shows_a_negative_rate() -> None:
    # A new broker epoch (the broker registered again): the old samples are another process's.
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH + 5, counters(900)),
        now_ms=3_000,
    ) is None  # fmt: skip
    # Counters that went back in the same epoch (restarted counts): start over as well.
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH, counters(150)),
        (5_000, EPOCH, counters(4)),
        now_ms=5_000,
    ) is None  # fmt: skip
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH, counters(4)),
        (5_000, EPOCH, counters(24)),
        now_ms=5_000,
    ) == BrokerRates(10.0, 100.0, 0.0, 0.0, 0.0, 0.0)  # fmt: skip


def test_a_heartbeat_without_counters_forgets_the_broker() -> None:
    # A broker that does not send the counters (an older one) shows "-", not its old rate.
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH, counters(150)),
        (5_000, EPOCH, None),
        now_ms=5_000,
    ) is None  # fmt: skip


def test_a_silent_broker_has_no_rate_once_its_last_heartbeat_is_too_old() -> None:
    beats = ((1_000, EPOCH, counters(100)), (3_000, EPOCH, counters(150)))
    assert rates_after(*beats, now_ms=3_000 + MAX_AGE_MS) is not None
    assert rates_after(*beats, now_ms=3_001 + MAX_AGE_MS) is None


def test_a_heartbeat_the_controller_handled_late_skews_no_rate() -> None:
    """Review 2 (rate_skew.py): a steady 1,000 messages/s, sampled by the broker every 2 s;
    heartbeat 2 waits 1.5 s for the controller's write, heartbeat 3 is on time."""
    beats = [(0, 0), (2_000, 3_500), (4_000, 4_000)]  # (sampled_ms, received_ms)
    rates = HeartbeatRates()
    seen = []
    for sampled_ms, received_ms in beats:
        rates.handle_heartbeat(1, EPOCH, counters(sampled_ms), received_ms, sampled_ms)
        found = rates.rates(1, received_ms, MAX_AGE_MS)
        seen.append(None if found is None else found.messages_in)
    assert seen == [None, 1_000.0, 1_000.0]  # the broker's clock: exact
    # From a broker that sends no time: never a rate over less than the minimum window.
    rates = HeartbeatRates()
    seen = []
    for sampled_ms, received_ms in beats:
        rates.handle_heartbeat(1, EPOCH, counters(sampled_ms), received_ms)
        found = rates.rates(1, received_ms, MAX_AGE_MS)
        seen.append(None if found is None else round(found.messages_in))
    assert seen == [None, 571, 1_000]  # not 4,000/s over the 500 ms between the last two


def test_a_rate_spans_at_least_the_minimum_window() -> None:
    close = MIN_RATE_WINDOW_MS - 1
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (1_000 + close, EPOCH, counters(150)),
        now_ms=1_000 + close,
    ) is None  # fmt: skip
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (1_000 + MIN_RATE_WINDOW_MS, EPOCH, counters(150)),
        now_ms=1_000 + MIN_RATE_WINDOW_MS,
    ) == BrokerRates(
        50_000 / MIN_RATE_WINDOW_MS, 500_000 / MIN_RATE_WINDOW_MS, 0.0, 0.0, 0.0, 0.0
    )  # fmt: skip


def test_two_heartbeats_in_one_millisecond_keep_the_interval() -> None:
    assert rates_after(
        (1_000, EPOCH, counters(100)),
        (3_000, EPOCH, counters(150)),
        (3_000, EPOCH, counters(160)),
        now_ms=3_000,
    ) == BrokerRates(30.0, 300.0, 0.0, 0.0, 0.0, 0.0)  # fmt: skip
    assert rates_after(
        (3_000, EPOCH, counters(150)),
        (3_000, EPOCH, counters(160)),
        now_ms=3_000,
    ) is None  # fmt: skip


def test_brokers_are_kept_apart_and_bounded() -> None:
    rates = HeartbeatRates(max_brokers=2)
    for broker_id, received_ms in ((1, 0), (2, 0), (1, 1_000), (3, 1_000), (1, 2_000)):
        rates.handle_heartbeat(broker_id, EPOCH, counters(received_ms // 10), received_ms)
    # Broker 2 was heard from longest ago: it went when broker 3 came.
    assert set(rates.all_rates(2_000, MAX_AGE_MS)) == {1}
    assert rates.rates(1, 2_000, MAX_AGE_MS) == BrokerRates(100.0, 1_000.0, 0.0, 0.0, 0.0, 0.0)
    assert rates.rates(2, 2_000, MAX_AGE_MS) is None
