"""Pure cores of ``pykraft producer-perf-test`` and ``consumer-perf-test``: the statistics
window, throttle and output lines of Kafka's perf tools, with time passed in (``now_ms``).

Sources: Kafka's ``tools/src/main/java/org/apache/kafka/tools/ProducerPerformance.java``
(``Stats``: a window line every 5000 ms, ``"%d records sent, %.1f records/sec (%.2f MB/sec),
%.1f ms avg latency, %.1f ms max latency."``, the total line with ``%f`` records/sec and the 50th,
95th, 99th and 99.9th latency percentiles of at most 500,000 samples),
``ThroughputThrottler.java`` (sleep debt paid once it reaches 2 ms) and
``ConsumerPerformance.java`` (``printHeader``, the final line
``"%s, %s, %.4f, %.4f, %d, %.4f, %d, %d, %.4f, %.4f"``, ``printConsumerProgress`` for
``--show-detailed-stats``, dates in ``yyyy-MM-dd HH:mm:ss:SSS``). Java's ``%f`` is Python's
``%f`` (six decimals); a zero-length window prints Java's ``Infinity``/``NaN`` as Java would.
"""

from __future__ import annotations

import datetime
import decimal
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

REPORTING_INTERVAL_MS = 5000  # ProducerPerformance's window
MAX_LATENCY_SAMPLES = 500_000
MB = 1024.0 * 1024.0


def java_double(value: float, decimals: int) -> str:
    """Java's ``%.Nf`` of a double: ``Infinity`` and ``NaN`` spelt as Java spells them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    # Java rounds the double's exact decimal value HALF_UP (0.125 -> "0.13"); Python's
    # format rounds half to even on ties.
    exact = decimal.Decimal(value).quantize(
        decimal.Decimal(1).scaleb(-decimals), decimal.ROUND_HALF_UP
    )
    return f"{exact:.{decimals}f}"


def _divide(numerator: float, denominator: float) -> float:
    """Java's double division: x/0 is Infinity (or NaN for 0/0), never an exception."""
    if denominator == 0:
        return math.nan if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / denominator


def window_line(
    count: int, bytes_sent: int, total_latency_ms: int, max_latency_ms: int, elapsed_ms: int
) -> str:
    records_per_sec = _divide(1000.0 * count, elapsed_ms)
    mb_per_sec = _divide(1000.0 * bytes_sent, elapsed_ms) / MB
    return (
        f"{count} records sent, {java_double(records_per_sec, 1)} records/sec "
        f"({java_double(mb_per_sec, 2)} MB/sec), "
        f"{java_double(_divide(total_latency_ms, count), 1)} ms avg latency, "
        f"{java_double(max_latency_ms, 1)} ms max latency."
    )  # fmt: skip


def percentiles(latencies: list[int], *fractions: float) -> list[int]:
    """``Stats.percentiles``: the sorted sample at ``int(fraction * size)``."""
    ordered = sorted(latencies)
    if not ordered:
        return [0 for _ in fractions]
    return [ordered[min(int(fraction * len(ordered)), len(ordered) - 1)] for fraction in fractions]


@attrs.define
class ProducerStats:
    """``ProducerPerformance.Stats``: totals, the current window and sampled latencies."""

    start_ms: int
    num_records: int
    reporting_interval_ms: int = REPORTING_INTERVAL_MS
    window_start_ms: int = attrs.field(init=False)
    sampling: int = attrs.field(init=False)
    latencies: list[int] = attrs.Factory(list)
    count: int = 0
    bytes: int = 0
    total_latency_ms: int = 0
    max_latency_ms: int = 0
    window_count: int = 0
    window_bytes: int = 0
    window_total_latency_ms: int = 0
    window_max_latency_ms: int = 0

    def __attrs_post_init__(self) -> None:
        self.window_start_ms = self.start_ms
        self.sampling = max(
            1, self.num_records // max(1, min(self.num_records, MAX_LATENCY_SAMPLES))
        )

    def record(self, iteration: int, latency_ms: int, size: int, now_ms: int) -> str | None:
        """One acknowledged record; the window's line when the window is over, else None."""
        self.count += 1
        self.bytes += size
        self.total_latency_ms += latency_ms
        self.max_latency_ms = max(self.max_latency_ms, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency_ms += latency_ms
        self.window_max_latency_ms = max(self.window_max_latency_ms, latency_ms)
        if iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        if now_ms - self.window_start_ms < self.reporting_interval_ms:
            return None
        line = window_line(
            self.window_count, self.window_bytes, self.window_total_latency_ms,
            self.window_max_latency_ms, now_ms - self.window_start_ms,
        )  # fmt: skip
        self.window_start_ms = now_ms
        self.window_count = self.window_bytes = 0
        self.window_total_latency_ms = self.window_max_latency_ms = 0
        return line

    def total_line(self, now_ms: int) -> str:
        elapsed_ms = now_ms - self.start_ms
        records_per_sec = _divide(1000.0 * self.count, elapsed_ms)
        mb_per_sec = _divide(1000.0 * self.bytes, elapsed_ms) / MB
        p50, p95, p99, p999 = percentiles(self.latencies, 0.5, 0.95, 0.99, 0.999)
        return (
            f"{self.count} records sent, {java_double(records_per_sec, 6)} records/sec "
            f"({java_double(mb_per_sec, 2)} MB/sec), "
            f"{java_double(_divide(self.total_latency_ms, self.count), 2)} ms avg latency, "
            f"{java_double(self.max_latency_ms, 2)} ms max latency, {p50} ms 50th, {p95} ms 95th, "
            f"{p99} ms 99th, {p999} ms 99.9th."
        )


MIN_SLEEP_NS = 2_000_000  # ThroughputThrottler.MIN_SLEEP_NS
NS_PER_SEC = 1_000_000_000


@attrs.define
class ThroughputThrottler:
    """``ThroughputThrottler``: ``target`` records/sec (negative: no limit)."""

    target: float
    start_ms: int
    sleep_deficit_ns: int = 0

    def should_throttle(self, amount_so_far: int, send_start_ms: int) -> bool:
        if self.target < 0:
            return False
        elapsed_s = (send_start_ms - self.start_ms) / 1000.0
        return elapsed_s > 0 and amount_so_far / elapsed_s > self.target

    def sleep_ns(self) -> int:
        """The nanoseconds to sleep now (0: keep the debt for later). ``target`` 0 never
        sends: the caller waits for ever, as Kafka's tool does."""
        assert self.target > 0, "a target of 0 records/sec is handled by the caller"
        self.sleep_deficit_ns += int(NS_PER_SEC / self.target)
        if self.sleep_deficit_ns < MIN_SLEEP_NS:
            return 0
        sleep, self.sleep_deficit_ns = self.sleep_deficit_ns, 0
        return sleep


CONSUMER_FIELDS = "data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"  # noqa: E501
DEFAULT_DATE_FORMAT = "yyyy-MM-dd HH:mm:ss:SSS"


def consumer_header(show_detailed_stats: bool) -> str:
    if show_detailed_stats:
        return f"time, threadId, {CONSUMER_FIELDS}"
    return f"start.time, end.time, {CONSUMER_FIELDS}"


_DATE_LETTERS = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}
_DATE_TOKEN = re.compile(r"yyyy|yy|MM|dd|HH|mm|ss|SSS|[A-Za-z]|'[^']*'|[^A-Za-z']+")


class DateFormatError(ValueError):
    pass


def format_date(pattern: str, epoch_ms: int, tz: datetime.tzinfo | None = None) -> str:
    """``SimpleDateFormat(pattern).format(epoch_ms)`` for the letters Kafka's default uses
    (``yyyy yy MM dd HH mm ss SSS``; quoted text kept); other letters are refused."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000.0, tz)
    parts = []
    for token in _DATE_TOKEN.findall(pattern):
        if token in _DATE_LETTERS:
            parts.append(moment.strftime(_DATE_LETTERS[token]))
        elif token == "SSS":
            parts.append(f"{epoch_ms % 1000:03d}")
        elif token.startswith("'"):
            parts.append(token[1:-1] or "'")
        elif token.isalpha():
            raise DateFormatError(f"Unsupported date pattern letter '{token}' in '{pattern}'")
        else:
            parts.append(token)
    return "".join(parts)


@attrs.frozen
class ConsumerTotals:
    start_ms: int
    end_ms: int
    bytes_read: int
    messages_read: int
    join_time_ms: int


def consumer_total_line(
    totals: ConsumerTotals, date_format: str, tz: datetime.tzinfo | None = None
) -> str:
    elapsed_s = (totals.end_ms - totals.start_ms) / 1000.0
    fetch_time_ms = totals.end_ms - totals.start_ms - totals.join_time_ms
    mb_read = totals.bytes_read / MB
    return ", ".join(
        [
            format_date(date_format, totals.start_ms, tz),
            format_date(date_format, totals.end_ms, tz),
            java_double(mb_read, 4),
            java_double(_divide(mb_read, elapsed_s), 4),
            str(totals.messages_read),
            java_double(_divide(totals.messages_read, elapsed_s), 4),
            str(totals.join_time_ms),
            str(fetch_time_ms),
            java_double(_divide(mb_read, fetch_time_ms / 1000.0), 4),
            java_double(_divide(totals.messages_read, fetch_time_ms / 1000.0), 4),
        ]
    )


@attrs.frozen
class ConsumerWindow:
    """One ``--show-detailed-stats`` interval: totals now and at the interval's start."""

    bytes_read: int
    last_bytes_read: int
    messages_read: int
    last_messages_read: int
    start_ms: int
    end_ms: int
    join_time_ms: int


def consumer_progress_line(
    window: ConsumerWindow, date_format: str, tz: datetime.tzinfo | None = None
) -> str:
    """``printConsumerProgress`` (thread id 0, as Kafka's single-threaded tool prints it)."""
    elapsed_ms = window.end_ms - window.start_ms
    interval_mb = (window.bytes_read - window.last_bytes_read) / MB
    interval_messages = window.messages_read - window.last_messages_read
    fetch_time_ms = elapsed_ms - window.join_time_ms
    fetch_mb_per_sec = 0.0 if fetch_time_ms <= 0 else 1000.0 * interval_mb / fetch_time_ms
    fetch_messages_per_sec = (
        0.0 if fetch_time_ms <= 0 else 1000.0 * interval_messages / fetch_time_ms
    )
    return ", ".join(
        [
            format_date(date_format, window.end_ms, tz),
            "0",
            java_double(window.bytes_read / MB, 4),
            java_double(_divide(1000.0 * interval_mb, elapsed_ms), 4),
            str(window.messages_read),
            java_double(_divide(interval_messages, elapsed_ms) * 1000.0, 4),
            str(window.join_time_ms),
            str(fetch_time_ms),
            java_double(fetch_mb_per_sec, 4),
            java_double(fetch_messages_per_sec, 4),
        ]
    )


def consumer_timeout_warning(timeout_ms: int) -> str:
    return (
        "WARNING: Exiting before consuming the expected number of messages: timeout "
        f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the timeout."
    )


# librdkafka's statistics (its STATISTICS.md top-level totals) -> Kafka's network metrics.
_NETWORK_METRICS = {
    "request-total": "tx",
    "response-total": "rx",
    "outgoing-byte-total": "tx_bytes",
    "incoming-byte-total": "rx_bytes",
}


def client_metrics(
    group: str, client_id: str, statistics: Mapping[str, Any], totals: Mapping[str, float]
) -> dict[str, float]:
    """``--print-metrics``' values under Kafka's names (``group:name:{client-id=...}``): the
    tool's own ``totals`` (e.g. ``record-send-total``) and librdkafka's last ``statistics``'
    request and byte counts under ``group``."""
    tags = f"{{client-id={client_id}}}"
    values = {f"{group}:{name}:{tags}": float(value) for name, value in totals.items()}
    for name, field in _NETWORK_METRICS.items():
        if field in statistics:
            values[f"{group}:{name}:{tags}"] = float(statistics[field])
    return values


def metrics_lines(metrics: Mapping[str, float | str]) -> list[str]:
    """``ToolsUtils.printMetrics``: a blank line, ``Metric Name   Value``, then each metric
    sorted by name, padded to the longest, doubles as ``%.3f``."""
    if not metrics:
        return []
    width = max(len(name) for name in metrics)
    lines = ["", f"{'Metric Name':<{width}}   Value"]
    for name in sorted(metrics):
        value = metrics[name]
        shown = java_double(value, 3) if isinstance(value, float) else value
        lines.append(f"{name:<{width}} : {shown}")
    return lines
