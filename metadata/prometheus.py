"""Prometheus text exposition (format 0.0.4): the metric families the broker and the
controller render on ``GET /metrics``.

Pure bookkeeping: counters, gauges, histograms and summaries, updated by their owners' shells.
No clock (callers pass measured durations), no I/O, no threads — each process updates them on
its one event loop. ``prometheus_client`` is not used: the subset needed here is small, and its
global registry and threading would be the only ones in the process. It lives in ``metadata/``
because both processes render it and ``metadata`` is what ``broker`` and ``quorum`` may both
import (as with ``metadata/api``).

Exposition rules followed (https://prometheus.io/docs/instrumenting/exposition_formats/):
one ``# HELP`` and one ``# TYPE`` line per family before its samples; label values escape
``\\``, ``"`` and newlines; HELP text escapes ``\\`` and newlines; histograms expose cumulative
``_bucket{le="…"}`` samples ending in ``le="+Inf"`` (equal to ``_count``), then ``_sum`` and
``_count``; summaries one sample per ``quantile`` label, then ``_sum`` and ``_count``; counters
end in ``_total``.

Every family holds at most ``max_series`` label sets (``MAX_SERIES_PER_FAMILY`` unless given);
label values come from closed sets (API names, close reasons) or are bounded by their owner
(the broker's topics: ``broker/broker_topic_stats.py``), so reaching it is a bug and asserts.
"""

from __future__ import annotations

import enum
import math
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Generic, TypeVar

MAX_SERIES_PER_FAMILY = 512
# Request latency buckets in seconds: 0.5 ms to 10 s, covering a local Metadata call up to a
# Fetch long poll that waits fetch.max.wait.ms (500 ms) or a slow acks=all Produce.
LATENCY_BUCKETS_SECONDS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

Labels = tuple[tuple[str, str], ...]


class MetricType(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"


def format_value(value: float) -> str:
    """A sample value as Prometheus parses it (Go's ParseFloat syntax)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label_text(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{name}="{escape_label_value(value)}"' for name, value in labels)
    return "{" + inner + "}"


class Family:
    """A metric name with its HELP, TYPE and label names."""

    metric_type: MetricType

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Sequence[str] = (),
        max_series: int = MAX_SERIES_PER_FAMILY,
    ) -> None:
        assert name.replace("_", "").isalnum() and not name[0].isdigit(), name
        assert max_series >= 1
        self.name = name
        self.help_text = help_text
        self.label_names = tuple(label_names)
        self.max_series = max_series
        # The label sets already made, by their values: updates on the request path (several
        # per request) skip rebuilding them. Bounded as the series are.
        self._known: dict[tuple[str, ...], Labels] = {}

    def _labels(self, values: tuple[str, ...]) -> Labels:
        labels = self._known.get(values)
        if labels is None:
            assert len(values) == len(self.label_names), f"{self.name}: labels {self.label_names}"
            labels = tuple(zip(self.label_names, values, strict=True))
            if len(self._known) < self.max_series:
                self._known[values] = labels
        return labels

    def _check_room(self, series: Mapping[Labels, object], labels: Labels) -> None:
        assert labels in series or len(series) < self.max_series, (
            f"{self.name}: more than {self.max_series} label sets"
        )

    def header(self) -> Iterator[str]:
        yield f"# HELP {self.name} {escape_help(self.help_text)}"
        yield f"# TYPE {self.name} {self.metric_type.value}"

    def samples(self) -> Iterator[str]:
        raise NotImplementedError


class Counter(Family):
    metric_type = MetricType.COUNTER

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Sequence[str] = (),
        max_series: int = MAX_SERIES_PER_FAMILY,
    ) -> None:
        assert name.endswith("_total"), f"counter {name} must end in _total"
        super().__init__(name, help_text, label_names, max_series)
        self._values: dict[Labels, int | float] = {} if label_names else {(): 0}

    def inc(self, *label_values: str, amount: float = 1) -> None:
        assert amount >= 0, f"{self.name}: counters only go up"
        labels = self._labels(label_values)
        current = self._values.get(labels)
        if current is None:
            self._check_room(self._values, labels)
            current = 0
        self._values[labels] = current + amount

    def value(self, *label_values: str) -> float:
        return self._values.get(self._labels(label_values), 0)

    def samples(self) -> Iterator[str]:
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_label_text(labels)} {format_value(value)}"


class Gauge(Family):
    metric_type = MetricType.GAUGE

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, int | float] = {} if label_names else {(): 0}

    def set(self, value: float, *label_values: str) -> None:
        labels = self._labels(label_values)
        self._check_room(self._values, labels)
        self._values[labels] = value

    def add(self, amount: float, *label_values: str) -> None:
        labels = self._labels(label_values)
        self.set(self._values.get(labels, 0) + amount, *label_values)

    def value(self, *label_values: str) -> float:
        return self._values.get(self._labels(label_values), 0)

    def samples(self) -> Iterator[str]:
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_label_text(labels)} {format_value(value)}"


class _Observations:
    """One label set's observed values: their ``_sum`` and ``_count``, which histograms and
    summaries both expose."""

    def __init__(self) -> None:
        self.sum = 0.0
        self.count = 0


_SeriesT = TypeVar("_SeriesT", bound=_Observations)


class _ObservedFamily(Family, Generic[_SeriesT]):
    """A family of observed values (histogram, summary): a series per label set, made on its
    first observation, rendered as the type's own samples then ``_sum`` and ``_count``."""

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Sequence[str],
        new_series: Callable[[], _SeriesT],
    ) -> None:
        super().__init__(name, help_text, label_names)
        self._new_series = new_series
        self._series: dict[Labels, _SeriesT] = {}

    def series(self, *label_values: str) -> _SeriesT:
        """One label set's series (made now if new), for a hot path that keeps it and calls its
        ``observe`` without looking the labels up each time (``BrokerMetrics.record_request``)."""
        return self._series_for(label_values)

    def _series_for(self, label_values: tuple[str, ...]) -> _SeriesT:
        labels = self._labels(label_values)
        series = self._series.get(labels)
        if series is None:
            self._check_room(self._series, labels)
            series = self._series[labels] = self._new_series()
        return series

    def count(self, *label_values: str) -> int:
        series = self._series.get(self._labels(label_values))
        return series.count if series is not None else 0

    def _sorted_series(self) -> list[tuple[Labels, _SeriesT]]:
        return sorted(self._series.items(), key=lambda item: item[0])

    def _sum_and_count(self, labels: Labels, series: _SeriesT) -> Iterator[str]:
        yield f"{self.name}_sum{_label_text(labels)} {format_value(series.sum)}"
        yield f"{self.name}_count{_label_text(labels)} {series.count}"


class _HistogramSeries(_Observations):
    def __init__(self, buckets: tuple[float, ...]) -> None:
        super().__init__()
        self.buckets = buckets
        # Invariant: counts[i] observations fell in (bounds[i-1], bounds[i]]; the last slot is
        # the +Inf bucket, so sum(counts) == count.
        self.counts = [0] * (len(buckets) + 1)

    def observe(self, value: float) -> None:
        # The first bucket whose bound is >= value; NaN (no bound holds it) counts in +Inf.
        index = bisect_left(self.buckets, value) if value == value else len(self.buckets)
        self.counts[index] += 1
        self.sum += value
        self.count += 1


class Histogram(_ObservedFamily[_HistogramSeries]):
    metric_type = MetricType.HISTOGRAM

    def __init__(
        self,
        name: str,
        help_text: str,
        label_names: Sequence[str] = (),
        buckets: Sequence[float] = LATENCY_BUCKETS_SECONDS,
    ) -> None:
        assert list(buckets) == sorted(set(buckets)) and buckets, "buckets must increase"
        assert "le" not in label_names
        super().__init__(name, help_text, label_names, lambda: _HistogramSeries(self.buckets))
        self.buckets = tuple(float(bound) for bound in buckets)

    def observe(self, value: float, *label_values: str) -> None:
        self._series_for(label_values).observe(value)

    def samples(self) -> Iterator[str]:
        for labels, series in self._sorted_series():
            cumulative = 0
            bounds = [format_value(bound) for bound in self.buckets] + ["+Inf"]
            for bound, bucket_count in zip(bounds, series.counts, strict=True):
                cumulative += bucket_count
                bucket_labels = (*labels, ("le", bound))
                yield f"{self.name}_bucket{_label_text(bucket_labels)} {cumulative}"
            yield from self._sum_and_count(labels, series)


# Kafka's histogram percentiles as the JMX exporter labels them (``50thPercentile`` ->
# ``quantile="0.50"``; Yammer ``Histogram``'s 50/75/95/98/99/99.9th percentiles).
KAFKA_QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
    ("0.999", 0.999),
)  # fmt: skip
# Yammer's default reservoir holds 1028 samples (``ExponentiallyDecayingReservoir``); ours keeps
# the latest 1028 in order (a sliding window), which needs neither a clock nor randomness.
RESERVOIR_SIZE = 1028


class _SummarySeries(_Observations):
    def __init__(self) -> None:
        super().__init__()
        # Invariant: at most RESERVOIR_SIZE samples, the latest observed.
        self.window: deque[float] = deque(maxlen=RESERVOIR_SIZE)

    def observe(self, value: float) -> None:
        self.window.append(value)
        self.sum += value
        self.count += 1


def quantile(values: Sequence[float], q: float) -> float:
    """Yammer ``Snapshot.getValue(q)``: interpolate between the two samples around
    ``q * (n + 1)`` of the sorted values (NaN without samples)."""
    assert 0.0 <= q <= 1.0
    if not values:
        return math.nan
    ordered = sorted(values)
    position = q * (len(ordered) + 1)
    if position < 1:
        return ordered[0]
    if position >= len(ordered):
        return ordered[-1]
    lower = ordered[int(position) - 1]
    upper = ordered[int(position)]
    return lower + (position - math.floor(position)) * (upper - lower)


class Summary(_ObservedFamily[_SummarySeries]):
    """Kafka's Yammer histograms (``RequestMetrics`` ``TotalTimeMs``) the way the JMX exporter
    shows them: a gauge per ``quantile`` label over the latest ``RESERVOIR_SIZE`` samples,
    ``_count``, and (which the exporter lacks) ``_sum``."""

    metric_type = MetricType.SUMMARY

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        assert "quantile" not in label_names
        super().__init__(name, help_text, label_names, _SummarySeries)

    def observe(self, value: float, *label_values: str) -> None:
        self._series_for(label_values).observe(value)

    def samples(self) -> Iterator[str]:
        for labels, series in self._sorted_series():
            window = list(series.window)
            for text, q in KAFKA_QUANTILES:
                value = format_value(quantile(window, q))
                yield f"{self.name}{_label_text((*labels, ('quantile', text)))} {value}"
            yield from self._sum_and_count(labels, series)


class TopicCounter(Family):
    """A counter kept for all topics (no label, Kafka's ``allTopicsStats``) and per topic
    (``topic`` label), as ``BrokerTopicMetrics`` are. Past ``max_series`` topics a new topic is
    counted in the total only, so a cluster of many topics bounds the page, not the broker."""

    metric_type = MetricType.COUNTER

    def __init__(self, name: str, help_text: str, max_series: int) -> None:
        assert name.endswith("_total"), f"counter {name} must end in _total"
        super().__init__(name, help_text, ("topic",), max_series)
        self.total: int = 0
        self._by_topic: dict[str, int] = {}

    def inc(self, topic: str, amount: int) -> None:
        assert amount >= 0, f"{self.name}: counters only go up"
        self.total += amount
        if topic in self._by_topic or len(self._by_topic) < self.max_series:
            self._by_topic[topic] = self._by_topic.get(topic, 0) + amount

    def value(self, topic: str | None = None) -> int:
        return self.total if topic is None else self._by_topic.get(topic, 0)

    def remove(self, topic: str) -> None:
        """A deleted topic's series goes (Kafka's ``BrokerTopicStats.removeMetrics``)."""
        self._by_topic.pop(topic, None)

    def samples(self) -> Iterator[str]:
        yield f"{self.name} {self.total}"
        for topic, value in sorted(self._by_topic.items()):
            yield f"{self.name}{_label_text((('topic', topic),))} {value}"


class MetricsRegistry:
    """Families in registration order; ``render`` is the /metrics body."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def register(self, family: Family) -> None:
        assert family.name not in self._families, f"metric {family.name} registered twice"
        self._families[family.name] = family

    def render(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.header())
            lines.extend(family.samples())
        return "\n".join(lines) + "\n"
