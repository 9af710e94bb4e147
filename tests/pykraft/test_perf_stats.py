"""``perf_stats``: the lines of Kafka's ``ProducerPerformance`` and ``ConsumerPerformance``
(their printf formats, Java's rounding), the statistics window and the throttle."""

from __future__ import annotations

import datetime

import pytest

from pykraft.perf_stats import (
    ConsumerTotals,
    ConsumerWindow,
    DateFormatError,
    ProducerStats,
    ThroughputThrottler,
    client_metrics,
    consumer_header,
    consumer_progress_line,
    consumer_timeout_warning,
    consumer_total_line,
    format_date,
    java_double,
    metrics_lines,
    percentiles,
)

UTC = datetime.UTC


@pytest.mark.parametrize(
    ("value", "decimals", "expected"),
    [
        (0.125, 2, "0.13"),  # Java's HALF_UP (Python's format gives 0.12)
        (2.25, 1, "2.3"),
        (1000.0, 6, "1000.000000"),
        (float("inf"), 1, "Infinity"),
        (float("nan"), 4, "NaN"),
    ],
)
def test_java_double_formats_as_java_printf(value: float, decimals: int, expected: str) -> None:
    assert java_double(value, decimals) == expected


def test_producer_window_line_every_five_seconds() -> None:
    stats = ProducerStats(start_ms=0, num_records=10)
    assert stats.record(0, latency_ms=4, size=100, now_ms=1000) is None
    assert stats.record(1, latency_ms=8, size=100, now_ms=4999) is None
    assert stats.record(2, latency_ms=3, size=100, now_ms=5000) == (
        "3 records sent, 0.6 records/sec (0.00 MB/sec), 5.0 ms avg latency, 8.0 ms max latency."
    )
    # A new window starts at the line.
    assert stats.record(3, latency_ms=1, size=100, now_ms=10_000) == (
        "1 records sent, 0.2 records/sec (0.00 MB/sec), 1.0 ms avg latency, 1.0 ms max latency."
    )


def test_producer_total_line_with_percentiles() -> None:
    stats = ProducerStats(start_ms=0, num_records=2000, reporting_interval_ms=10**9)
    for iteration in range(2000):
        stats.record(iteration, latency_ms=iteration % 100, size=1024, now_ms=100)
    # 2000 records of 1 KiB in 1 s; latencies 0..99 twenty times each.
    assert stats.total_line(now_ms=1000) == (
        "2000 records sent, 2000.000000 records/sec (1.95 MB/sec), 49.50 ms avg latency, "
        "99.00 ms max latency, 50 ms 50th, 95 ms 95th, 99 ms 99th, 99 ms 99.9th."
    )


def test_latency_samples_are_bounded() -> None:
    stats = ProducerStats(start_ms=0, num_records=1_500_000)
    assert stats.sampling == 3  # Kafka: numRecords / min(numRecords, 500000)
    for iteration in range(9):
        stats.record(iteration, iteration, 1, 0)
    assert stats.latencies == [0, 3, 6]


def test_percentiles_take_the_sorted_sample_at_the_fraction() -> None:
    assert percentiles([5, 1, 3, 2, 4], 0.5, 0.95, 0.999) == [3, 5, 5]
    assert percentiles([], 0.5) == [0]


def test_throttler_sleeps_once_the_debt_reaches_two_ms() -> None:
    slow = ThroughputThrottler(target=100, start_ms=0)
    assert slow.should_throttle(amount_so_far=10, send_start_ms=50)  # 200/s > 100/s
    assert not slow.should_throttle(amount_so_far=4, send_start_ms=50)
    assert slow.sleep_ns() == 10_000_000
    fast = ThroughputThrottler(target=1000, start_ms=0)
    assert [fast.sleep_ns(), fast.sleep_ns(), fast.sleep_ns()] == [0, 2_000_000, 0]
    assert not ThroughputThrottler(target=-1, start_ms=0).should_throttle(10**9, 1)


def test_consumer_header_lines() -> None:
    assert consumer_header(False) == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    assert consumer_header(True) == (
        "time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )


def test_consumer_total_line() -> None:
    totals = ConsumerTotals(
        start_ms=1_700_000_000_123, end_ms=1_700_000_002_123, bytes_read=2 * 1024 * 1024,
        messages_read=2000, join_time_ms=1000,
    )  # fmt: skip
    assert consumer_total_line(totals, "yyyy-MM-dd HH:mm:ss:SSS", UTC) == (
        "2023-11-14 22:13:20:123, 2023-11-14 22:13:22:123, 2.0000, 1.0000, 2000, 1000.0000, "
        "1000, 1000, 2.0000, 2000.0000"
    )


def test_consumer_progress_line() -> None:
    window = ConsumerWindow(
        bytes_read=3 * 1024 * 1024, last_bytes_read=1024 * 1024, messages_read=300,
        last_messages_read=100, start_ms=0, end_ms=2000, join_time_ms=1000,
    )  # fmt: skip
    assert consumer_progress_line(window, "yyyy-MM-dd HH:mm:ss:SSS", UTC) == (
        "1970-01-01 00:00:02:000, 0, 3.0000, 1.0000, 300, 100.0000, 1000, 1000, 2.0000, 200.0000"
    )


def test_consumer_timeout_warning() -> None:
    assert consumer_timeout_warning(10000) == (
        "WARNING: Exiting before consuming the expected number of messages: timeout (10000 ms) "
        "exceeded. You can use the --timeout option to increase the timeout."
    )


def test_date_format_subset_of_simple_date_format() -> None:
    assert format_date("dd/MM/yy 'at' HH:mm", 0, UTC) == "01/01/70 at 00:00"
    with pytest.raises(DateFormatError, match="Unsupported date pattern letter 'E'"):
        format_date("E yyyy", 0, UTC)


def test_metrics_printed_as_kafkas_tools_utils_prints_them() -> None:
    metrics = client_metrics(
        "producer-metrics", "perf-producer-client", {"tx": 4, "rx": 4, "tx_bytes": 2074, "ts": 9},
        {"record-send-total": 100, "record-error-total": 0},
    )  # fmt: skip
    assert metrics_lines(metrics) == [
        "",
        "Metric Name                                                             Value",
        "producer-metrics:outgoing-byte-total:{client-id=perf-producer-client} : 2074.000",
        "producer-metrics:record-error-total:{client-id=perf-producer-client}  : 0.000",
        "producer-metrics:record-send-total:{client-id=perf-producer-client}   : 100.000",
        "producer-metrics:request-total:{client-id=perf-producer-client}       : 4.000",
        "producer-metrics:response-total:{client-id=perf-producer-client}      : 4.000",
    ]
    assert metrics_lines({}) == []
