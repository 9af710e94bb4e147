"""Prometheus text exposition (format 0.0.4), checked by parsing the output back strictly."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from pykraft.broker import metrics as metrics_module
from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.metrics import (
    BrokerMetrics,
    CloseReason,
    Counter,
    Gauge,
    Histogram,
    MetricsRegistry,
    Summary,
    api_name,
    format_value,
)
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.prometheus import RESERVOIR_SIZE, TopicCounter, quantile
from pykraft.metadata.records import RemoveTopicRecord
from tests.quorum.helpers import image_with, topic_id

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_VALUE = r'"(?:[^"\\\n]|\\\\|\\"|\\n)*"'
LABEL = rf"([a-zA-Z_][a-zA-Z0-9_]*)=({LABEL_VALUE})"
ANY_LABEL = rf"[a-zA-Z_][a-zA-Z0-9_]*={LABEL_VALUE}"
SAMPLE = re.compile(
    rf"^(?P<name>{NAME})(?:\{{(?P<labels>{ANY_LABEL}(?:,{ANY_LABEL})*)\}})? (?P<value>\S+)$"
)
VALUE = re.compile(r"^(?:[+-]?Inf|NaN|[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)$")


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse(text: str) -> dict[str, Any]:
    """Parse exposition text into families; assert every line is well-formed."""
    assert text.endswith("\n")
    families: dict[str, Any] = {}
    current: Any = None
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert re.fullmatch(NAME, name) and name not in families, line
            current = {"help": help_text, "type": None, "samples": []}
            families[name] = current
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert name in families and current is families[name], line
            assert current["type"] is None, line
            assert kind in ("counter", "gauge", "histogram", "summary"), line
            current["type"] = kind
        else:
            match = SAMPLE.match(line)
            assert match, f"malformed sample line {line!r}"
            assert current is not None and current["type"] is not None, line
            labels = {
                m.group(1): unescape(m.group(2)[1:-1])
                for m in re.finditer(LABEL, match.group("labels") or "")
            }
            assert VALUE.match(match.group("value")), line
            current["samples"].append((match.group("name"), labels, float(match.group("value"))))
    for name, family in families.items():
        check_family(name, family)
    return families


def check_family(name: str, family: Any) -> None:
    if family["type"] == "counter":
        assert name.endswith("_total")
        assert all(
            sample_name == name and value >= 0 for sample_name, _, value in family["samples"]
        )
    elif family["type"] == "gauge":
        assert all(sample_name == name for sample_name, _, _ in family["samples"])
    elif family["type"] == "summary":
        check_summary(name, family["samples"])
    else:
        check_histogram(name, family["samples"])


def check_histogram(name: str, samples: Any) -> None:
    series: dict[Any, Any] = {}
    for sample_name, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        entry = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
        if sample_name == f"{name}_bucket":
            entry["buckets"].append((float(labels["le"]), value))
        elif sample_name == f"{name}_sum":
            assert "le" not in labels
            entry["sum"] = value
        else:
            assert sample_name == f"{name}_count" and "le" not in labels
            entry["count"] = value
    for entry in series.values():
        bounds = [bound for bound, _ in entry["buckets"]]
        counts = [count for _, count in entry["buckets"]]
        assert bounds == sorted(bounds) and bounds[-1] == math.inf
        assert counts == sorted(counts), "buckets must be cumulative"
        assert counts[-1] == entry["count"] and entry["sum"] is not None


def check_summary(name: str, samples: Any) -> None:
    """Each label set: the JMX exporter's six quantiles in order, then _sum and _count."""
    series: dict[Any, list[Any]] = {}
    for sample_name, labels, value in samples:
        key = tuple(sorted((k, v) for k, v in labels.items() if k != "quantile"))
        series.setdefault(key, []).append((sample_name, labels.get("quantile"), value))
    for entries in series.values():
        assert [(n, q) for n, q, _ in entries] == [
            *((name, q) for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")),
            (f"{name}_sum", None),
            (f"{name}_count", None),
        ]
        quantiles = [v for _, q, v in entries if q is not None]
        assert quantiles == sorted(quantiles)


def test_broker_metrics_render_and_parse_back() -> None:
    metrics = BrokerMetrics()
    metrics.record_request(18, 3, 0.0002)
    metrics.record_request(18, 4, 0.003)
    metrics.record_request(0, 9, 0.7)
    metrics.record_request(0, 9, 42.0)  # beyond the last bucket: only +Inf counts it
    metrics.record_bytes_in(300)
    metrics.record_bytes_out(120)
    metrics.record_connection_opened()
    metrics.record_connection_opened()
    metrics.record_connection_closed(CloseReason.MALFORMED_REQUEST)
    metrics.set_broker_state(BrokerState.RUNNING)
    metrics.set_partition_counts(led=5, under_replicated=2)
    metrics.set_metadata_progress(applied_offset=99, committed_end_offset=110)

    families = parse(metrics.render())

    def value(name: str, family: str | None = None, **labels: str) -> float:
        samples = families[family or name]["samples"]
        [found] = [v for n, lab, v in samples if n == name and lab == labels]
        return float(found)

    duration = "pykraft_request_duration_seconds"
    assert value(f"{duration}_count", duration, api="ApiVersions") == 2
    assert value(f"{duration}_count", duration, api="Produce") == 2
    assert "pykraft_requests_total" not in families  # the histogram's _count is the count
    hist = {
        (labels["api"], labels["le"]): v
        for n, labels, v in families["pykraft_request_duration_seconds"]["samples"]
        if n.endswith("_bucket")
    }
    assert hist[("ApiVersions", "0.0005")] == 1
    assert hist[("ApiVersions", "0.005")] == 2
    assert hist[("Produce", "1.0")] == 1
    assert hist[("Produce", "10.0")] == 1
    assert hist[("Produce", "+Inf")] == 2
    assert value(
        "pykraft_request_duration_seconds_sum", "pykraft_request_duration_seconds", api="Produce"
    ) == pytest.approx(42.7)
    assert value("pykraft_network_bytes_in_total") == 300
    assert value("pykraft_network_bytes_out_total") == 120
    assert value("pykraft_connections") == 1
    assert value("pykraft_connections_closed_total", reason="malformed_request") == 1
    assert value("kafka_server_kafkaserver_brokerstate") == 3
    assert value("kafka_server_replicamanager_leadercount") == 5
    assert value("kafka_server_replicamanager_underreplicatedpartitions") == 2
    assert value("pykraft_metadata_offset") == 99
    assert value("pykraft_metadata_lag_records") == 10
    # RequestMetrics: RequestsPerSec's Count by request name and version (one MBean each) and
    # TotalTimeMs in milliseconds by request name.
    requests = "kafka_network_requestmetrics_requests_total"
    assert value(requests, request="Produce", version="9") == 2
    assert value(requests, request="ApiVersions", version="3") == 1
    assert value(requests, request="ApiVersions", version="4") == 1
    total_time = "kafka_network_requestmetrics_totaltimems"
    assert value(f"{total_time}_count", total_time, request="ApiVersions") == 2
    assert value(f"{total_time}_sum", total_time, request="Produce") == pytest.approx(42_700)
    # Two samples, 700 and 42000 ms: Yammer's median interpolates at position 1.5.
    assert value(total_time, request="Produce", quantile="0.50") == pytest.approx(21_350)
    assert value(total_time, request="Produce", quantile="0.99") == 42_000
    assert {f["type"] for f in families.values()} == {"counter", "gauge", "histogram", "summary"}


def test_request_kinds_past_the_cached_bound_are_still_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # record_request keeps each (API key, version)'s series at hand up to MAX_REQUEST_KINDS (a
    # client names any pair); the ones past it take the lookup each time, and count the same.
    monkeypatch.setattr(metrics_module, "MAX_REQUEST_KINDS", 1)
    metrics = BrokerMetrics()
    for api_key, api_version, seconds in ((18, 3, 0.25), (1, 12, 0.5), (1, 12, 2.0)):
        metrics.record_request(api_key, api_version, seconds)
    assert metrics.kafka_requests.value("ApiVersions", "3") == 1
    assert metrics.kafka_requests.value("Fetch", "12") == 2
    assert metrics.request_duration.count("Fetch") == 2
    assert metrics.total_time_ms.count("Fetch") == 2
    assert metrics.request_duration.series("Fetch").sum == pytest.approx(2.5)
    assert metrics.total_time_ms.series("ApiVersions").sum == pytest.approx(250.0)


def test_fresh_metrics_parse_and_metadata_offset_starts_before_zero() -> None:
    families = parse(BrokerMetrics().render())
    assert families["pykraft_metadata_offset"]["samples"] == [("pykraft_metadata_offset", {}, -1)]
    # A labelled family with no observations yet has HELP and TYPE but no samples.
    assert families["pykraft_request_duration_seconds"]["samples"] == []


KAFKA_NAMES = {
    # Prometheus JMX exporter kafka-2_0_0.yml names of Kafka's broker MBeans.
    "kafka_server_brokertopicmetrics_messagesin_total": "counter",
    "kafka_server_brokertopicmetrics_bytesin_total": "counter",
    "kafka_server_brokertopicmetrics_bytesout_total": "counter",
    "kafka_server_brokertopicmetrics_replicationbytesout_total": "counter",
    "kafka_server_brokertopicmetrics_replicationbytesin_total": "counter",
    "kafka_server_replicamanager_underreplicatedpartitions": "gauge",
    "kafka_server_replicamanager_leadercount": "gauge",
    "kafka_server_replicamanager_offlinereplicacount": "gauge",
    "kafka_server_replicamanager_isrshrinks_total": "counter",
    "kafka_server_replicamanager_isrexpands_total": "counter",
    "kafka_server_kafkaserver_brokerstate": "gauge",
    "kafka_log_logmanager_offlinelogdirectorycount": "gauge",
    "kafka_network_requestmetrics_requests_total": "counter",
    "kafka_network_requestmetrics_totaltimems": "summary",
}


def test_the_broker_exposes_kafkas_names() -> None:
    families = parse(BrokerMetrics().render())
    assert {name: families[name]["type"] for name in KAFKA_NAMES} == KAFKA_NAMES


def test_broker_topic_metrics_count_per_topic_and_for_all_topics() -> None:
    metrics = BrokerMetrics()
    stats = metrics.broker_topic_stats
    stats.record_append("orders", 1000, 10)
    stats.record_append("orders", 500, 0)  # a duplicate batch: bytes, no messages (Kafka)
    stats.record_append("audit", 100, 1)
    stats.record_bytes_out("orders", 700, follower=False)
    stats.record_bytes_out("orders", 9000, follower=True)  # a follower: replication bytes
    stats.record_replication_bytes_in(4000)  # this broker's followers appended
    stats.record_replication_bytes_in(96)
    stats.record_isr_change(shrink=True)
    stats.record_isr_change(shrink=True)
    stats.record_isr_change(shrink=False)
    families = parse(metrics.render())

    def samples(name: str) -> dict[str, float]:
        return {lab.get("topic", "*"): v for _, lab, v in families[name]["samples"]}

    prefix = "kafka_server_brokertopicmetrics_"
    assert samples(prefix + "messagesin_total") == {"*": 11, "audit": 1, "orders": 10}
    assert samples(prefix + "bytesin_total") == {"*": 1600, "audit": 100, "orders": 1500}
    assert samples(prefix + "bytesout_total") == {"*": 700, "orders": 700}
    assert samples(prefix + "replicationbytesout_total") == {"*": 9000}
    assert samples(prefix + "replicationbytesin_total") == {"*": 4096}
    assert samples("kafka_server_replicamanager_isrshrinks_total") == {"*": 2}
    assert samples("kafka_server_replicamanager_isrexpands_total") == {"*": 1}
    stats.remove_topic("orders")
    assert samples_after_removal(metrics) == {"*": 11, "audit": 1}


def samples_after_removal(metrics: BrokerMetrics) -> dict[str, float]:
    family = parse(metrics.render())["kafka_server_brokertopicmetrics_messagesin_total"]
    return {lab.get("topic", "*"): v for _, lab, v in family["samples"]}


def test_topic_series_are_bounded_and_the_total_still_counts() -> None:
    counter = TopicCounter("in_total", "in", max_series=2)
    for topic in ("a", "b", "c", "a"):
        counter.inc(topic, 1)
    assert (counter.value(), counter.value("a"), counter.value("c")) == (4, 2, 0)
    assert list(counter.samples()) == [
        "in_total 4",
        'in_total{topic="a"} 2',
        'in_total{topic="b"} 1',
    ]


@pytest.mark.parametrize(
    ("q", "expected"),
    # Yammer metrics-core UniformSnapshotTest: the values 5, 1, 2, 3, 4.
    [(0.5, 3.0), (0.75, 4.5), (0.95, 5.0), (0.98, 5.0), (0.99, 5.0), (0.999, 5.0), (0.0, 1.0)],
)
def test_quantiles_interpolate_as_yammer_snapshots(q: float, expected: float) -> None:
    assert quantile([5, 1, 2, 3, 4], q) == expected


def test_a_summary_keeps_the_latest_samples_only() -> None:
    summary = Summary("t", "t")
    for _ in range(RESERVOIR_SIZE):
        summary.observe(1000.0)
    for _ in range(RESERVOIR_SIZE):
        summary.observe(1.0)  # the slow past has left the window; the count has not
    lines = list(summary.samples())
    assert lines[0] == 't{quantile="0.50"} 1.0' and lines[5] == 't{quantile="0.999"} 1.0'
    assert lines[-1] == f"t_count {2 * RESERVOIR_SIZE}"
    assert math.isnan(quantile([], 0.5))  # before any sample


def test_label_values_and_help_are_escaped() -> None:
    registry = MetricsRegistry()
    counter = Counter("odd_total", "help with \\ and\nnewline", ["name"])
    registry.register(counter)
    weird = 'quote " backslash \\ newline \n end'
    counter.inc(weird, amount=3)
    text = registry.render()
    assert "# HELP odd_total help with \\\\ and\\nnewline" in text
    families = parse(text)
    assert families["odd_total"]["samples"] == [("odd_total", {"name": weird}, 3.0)]


def test_histogram_with_custom_buckets() -> None:
    registry = MetricsRegistry()
    histogram = Histogram("size_bytes", "sizes", buckets=[10, 100])
    registry.register(histogram)
    for observed in (10, 11, 100, 1000):
        histogram.observe(observed)
    samples = parse(registry.render())["size_bytes"]["samples"]
    assert [(n, lab.get("le"), v) for n, lab, v in samples] == [
        ("size_bytes_bucket", "10.0", 1),
        ("size_bytes_bucket", "100.0", 3),
        ("size_bytes_bucket", "+Inf", 4),
        ("size_bytes_sum", None, 1121),
        ("size_bytes_count", None, 4),
    ]


def test_gauges_go_both_ways() -> None:
    gauge = Gauge("inflight", "in flight")
    gauge.add(3)
    gauge.add(-1)
    assert gauge.value() == 2
    gauge.set(-0.5)
    assert list(gauge.samples()) == ["inflight -0.5"]


def test_values_format_like_go() -> None:
    assert [format_value(v) for v in (3, 0.25, 1e-05, math.inf, -math.inf, math.nan)] == [
        "3", "0.25", "1e-05", "+Inf", "-Inf", "NaN",
    ]  # fmt: skip


def test_api_names_are_kafkas_request_names() -> None:
    assert [api_name(k) for k in (0, 1, 18, 22, 23, 999)] == [
        "Produce", "Fetch", "ApiVersions", "InitProducerId", "OffsetForLeaderEpoch", "Unknown",
    ]  # fmt: skip


def test_misuse_is_a_bug() -> None:
    counter = Counter("c_total", "c")
    with pytest.raises(AssertionError):
        counter.inc(amount=-1)
    with pytest.raises(AssertionError):
        Counter("no_suffix", "counters end in _total")
    registry = MetricsRegistry()
    registry.register(counter)
    with pytest.raises(AssertionError):
        registry.register(Counter("c_total", "twice"))


def test_a_deleted_topics_series_go_and_a_recreated_one_starts_from_zero() -> None:
    # Kafka's ReplicaManager removes a deleted topic's BrokerTopicMetrics (removeMetrics).
    image = image_with({1: "unfenced"}, {"orders": [((1,), (1,), 1)], "audit": [((1,), (1,), 1)]})
    metrics = BrokerMetrics()
    stats = metrics.broker_topic_stats
    stats.record_append("orders", 100, 1)
    stats.record_append("audit", 10, 1)
    delta = MetadataDelta(image)
    delta.replay(RemoveTopicRecord(topic_id=topic_id("orders")))
    stats.remove_deleted_topics(delta.topics)
    assert (stats.messages_in.value("orders"), stats.messages_in.value("audit")) == (0, 1)
    assert stats.messages_in.value() == 2  # the all-topics count never goes back
