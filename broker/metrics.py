"""Broker metrics and their Prometheus text exposition (format 0.0.4).

Pure bookkeeping: counters, gauges and histograms updated by the broker's shells and rendered on
``GET /metrics``. No clock (callers pass measured durations), no I/O, no threads — everything
runs on the broker's one event loop. ``prometheus_client`` is not used: the subset needed here
(three metric types, labels, text rendering) is small, and its global registry and threading
would be the only ones in the process.

Exposition rules followed (https://prometheus.io/docs/instrumenting/exposition_formats/):
one ``# HELP`` and one ``# TYPE`` line per family before its samples; label values escape
``\\``, ``"`` and newlines; HELP text escapes ``\\`` and newlines; histograms expose cumulative
``_bucket{le="…"}`` samples ending in ``le="+Inf"`` (equal to ``_count``), then ``_sum`` and
``_count``; counters end in ``_total``.

Every family holds at most ``MAX_SERIES_PER_FAMILY`` label sets; label values come from closed
sets (API names, close reasons), so reaching it is a bug and asserts.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator, Mapping, Sequence

from pykraft.broker.lifecycle import BrokerState
from pykraft.protocol.api_keys import ApiKey

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


class CloseReason(enum.Enum):
    """Why the broker or the client ended a Kafka connection (a label of connections_closed)."""

    CLIENT_CLOSED = "client_closed"
    MALFORMED_REQUEST = "malformed_request"
    REQUEST_REJECTED = "request_rejected"
    HANDLER_FAILED = "handler_failed"
    SEND_FAILED = "send_failed"
    SHUTDOWN = "shutdown"
    # connections.max.idle.ms passed with no bytes read or written.
    IDLE = "idle"
    # Evicted because a protected (inter-broker) listener went over max.connections.
    MAX_CONNECTIONS = "max_connections"
    # SASL or TLS authentication failed (Kafka's failed-authentication-total).
    AUTHENTICATION_FAILED = "authentication_failed"


# Kafka's request names (``ApiKeys.name``): API_VERSIONS → ApiVersions; looked up per request.
_API_NAMES = {
    int(key): "".join(part.capitalize() for part in key.name.split("_")) for key in ApiKey
}


def api_name(api_key: int) -> str:
    return _API_NAMES.get(api_key, "Unknown")


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


class _Family:
    """A metric name with its HELP, TYPE and label names."""

    metric_type: MetricType

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        assert name.replace("_", "").isalnum() and not name[0].isdigit(), name
        self.name = name
        self.help_text = help_text
        self.label_names = tuple(label_names)

    def _labels(self, values: Sequence[str]) -> Labels:
        assert len(values) == len(self.label_names), f"{self.name}: labels {self.label_names}"
        return tuple(zip(self.label_names, values, strict=True))

    def _check_room(self, series: Mapping[Labels, object], labels: Labels) -> None:
        assert labels in series or len(series) < MAX_SERIES_PER_FAMILY, (
            f"{self.name}: more than {MAX_SERIES_PER_FAMILY} label sets"
        )

    def header(self) -> Iterator[str]:
        yield f"# HELP {self.name} {escape_help(self.help_text)}"
        yield f"# TYPE {self.name} {self.metric_type.value}"

    def samples(self) -> Iterator[str]:
        raise NotImplementedError


class Counter(_Family):
    metric_type = MetricType.COUNTER

    def __init__(self, name: str, help_text: str, label_names: Sequence[str] = ()) -> None:
        assert name.endswith("_total"), f"counter {name} must end in _total"
        super().__init__(name, help_text, label_names)
        self._values: dict[Labels, int | float] = {} if label_names else {(): 0}

    def inc(self, *label_values: str, amount: float = 1) -> None:
        assert amount >= 0, f"{self.name}: counters only go up"
        labels = self._labels(label_values)
        self._check_room(self._values, labels)
        self._values[labels] = self._values.get(labels, 0) + amount

    def value(self, *label_values: str) -> float:
        return self._values.get(self._labels(label_values), 0)

    def samples(self) -> Iterator[str]:
        for labels, value in sorted(self._values.items()):
            yield f"{self.name}{_label_text(labels)} {format_value(value)}"


class Gauge(_Family):
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


class _HistogramSeries:
    def __init__(self, bucket_count: int) -> None:
        # Invariant: counts[i] observations fell in (bounds[i-1], bounds[i]]; the last slot is
        # the +Inf bucket, so sum(counts) == count.
        self.counts = [0] * (bucket_count + 1)
        self.sum = 0.0
        self.count = 0


class Histogram(_Family):
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
        super().__init__(name, help_text, label_names)
        self.buckets = tuple(float(bound) for bound in buckets)
        self._series: dict[Labels, _HistogramSeries] = {}

    def observe(self, value: float, *label_values: str) -> None:
        labels = self._labels(label_values)
        self._check_room(self._series, labels)
        series = self._series.get(labels)
        if series is None:
            series = self._series[labels] = _HistogramSeries(len(self.buckets))
        index = next((i for i, bound in enumerate(self.buckets) if value <= bound), -1)
        series.counts[index] += 1
        series.sum += value
        series.count += 1

    def count(self, *label_values: str) -> int:
        series = self._series.get(self._labels(label_values))
        return series.count if series is not None else 0

    def samples(self) -> Iterator[str]:
        for labels, series in sorted(self._series.items(), key=lambda item: item[0]):
            cumulative = 0
            bounds = [format_value(bound) for bound in self.buckets] + ["+Inf"]
            for bound, bucket_count in zip(bounds, series.counts, strict=True):
                cumulative += bucket_count
                bucket_labels = (*labels, ("le", bound))
                yield f"{self.name}_bucket{_label_text(bucket_labels)} {cumulative}"
            yield f"{self.name}_sum{_label_text(labels)} {format_value(series.sum)}"
            yield f"{self.name}_count{_label_text(labels)} {series.count}"


class MetricsRegistry:
    """Families in registration order; ``render`` is the /metrics body."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def register(self, family: _Family) -> None:
        assert family.name not in self._families, f"metric {family.name} registered twice"
        self._families[family.name] = family

    def render(self) -> str:
        lines: list[str] = []
        for family in self._families.values():
            lines.extend(family.header())
            lines.extend(family.samples())
        return "\n".join(lines) + "\n"


class BrokerMetrics:
    """The broker's metrics (Kafka's MBean in brackets); the network listener's hooks.

    Gauges are set by the components that own the numbers (ReplicaManager, MetadataLoader,
    the lifecycle); counters and histograms by the network listener.
    """

    def __init__(self) -> None:
        self.registry = MetricsRegistry()
        self.requests = Counter(
            "pykraft_requests_total",
            "Requests completed, by API (kafka.network RequestMetrics RequestsPerSec).",
            ["api"],
        )
        self.request_duration = Histogram(
            "pykraft_request_duration_seconds",
            "Time from a request's arrival to its response written, by API "
            "(RequestMetrics TotalTimeMs).",
            ["api"],
        )
        self.bytes_in = Counter(
            "pykraft_network_bytes_in_total", "Bytes read from Kafka client connections."
        )
        self.bytes_out = Counter(
            "pykraft_network_bytes_out_total", "Bytes written to Kafka client connections."
        )
        self.connections = Gauge("pykraft_connections", "Open Kafka client connections.")
        self.connections_closed = Counter(
            "pykraft_connections_closed_total",
            "Kafka client connections closed, by reason.",
            ["reason"],
        )
        self.connections_refused = Counter(
            "pykraft_connections_refused_total",
            "Kafka connections closed as soon as accepted, by reason "
            "(max_connections_per_ip: Kafka's TooManyConnectionsException).",
            ["reason"],
        )
        self.acceptor_blocked = Counter(
            "pykraft_acceptor_blocked_total",
            "Times a listener stopped accepting at max.connections until a connection closed "
            "(Kafka's AcceptorBlockedPercent).",
        )
        self.broker_state = Gauge(
            "pykraft_broker_state",
            "Kafka BrokerState value: 1 STARTING, 2 RECOVERY, 3 RUNNING, 6 "
            "PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN (KafkaServer BrokerState).",
        )
        self.partitions_led = Gauge(
            "pykraft_partitions_led", "Partitions this broker leads (ReplicaManager LeaderCount)."
        )
        self.under_replicated_partitions = Gauge(
            "pykraft_under_replicated_partitions",
            "Led partitions whose ISR is smaller than their replica set "
            "(ReplicaManager UnderReplicatedPartitions).",
        )
        self.metadata_offset = Gauge(
            "pykraft_metadata_offset", "Offset of the last metadata record applied to the image."
        )
        self.metadata_lag = Gauge(
            "pykraft_metadata_lag_records",
            "Committed metadata records not yet applied to the image.",
        )
        self.offline_replicas = Gauge(
            "pykraft_offline_replicas",
            "Replicas on this broker whose log could not be loaded or whose log dir failed "
            "(ReplicaManager OfflineReplicaCount).",
        )
        self.offline_log_dirs = Gauge(
            "pykraft_offline_log_dirs",
            "Log dirs taken offline by an I/O error (LogManager OfflineLogDirectoryCount).",
        )
        self.corrupt_batch_reads = Gauge(
            "pykraft_corrupt_batch_reads",
            "Fetch reads since start that met a stored batch failing its CRC below the "
            "recovery point; it was not served (storage.read_verification).",
        )
        # KIP-73: Kafka's LeaderReplication / FollowerReplication byte-rate, plus the bytes.
        self.replication_byte_rate = Gauge(
            "pykraft_replication_throttled_byte_rate",
            "Measured bytes/s of throttled replication (ReplicationQuotaManager byte-rate).",
            ("side",),
        )
        self.replication_bytes = Gauge(
            "pykraft_replication_throttled_bytes",
            "Bytes of throttled partitions moved since start, served (leader) or fetched "
            "(follower).",
            ("side",),
        )
        self.client_quota_throttles = Counter(
            "pykraft_client_quota_throttles_total",
            "Responses throttled by a client quota, by quota type (produce, fetch, request; "
            "ClientQuotaManager throttle-time).",
            ["quota_type"],
        )
        self.client_quota_throttle_time = Counter(
            "pykraft_client_quota_throttle_time_ms_total",
            "Milliseconds of throttle_time_ms given and connections muted for, by quota type "
            "(KIP-219).",
            ["quota_type"],
        )
        for family in (
            self.replication_byte_rate, self.replication_bytes,
            self.requests, self.request_duration, self.bytes_in, self.bytes_out,
            self.connections, self.connections_closed, self.connections_refused,
            self.acceptor_blocked, self.broker_state, self.partitions_led,
            self.under_replicated_partitions, self.metadata_offset, self.metadata_lag,
            self.offline_replicas, self.offline_log_dirs, self.corrupt_batch_reads,
            self.client_quota_throttles, self.client_quota_throttle_time,
        ):  # fmt: skip
            self.registry.register(family)
        self.metadata_offset.set(-1)

    # --- NetworkMetrics hooks (broker.network) ---

    def record_request(self, api_key: int, latency_seconds: float) -> None:
        name = api_name(api_key)
        self.requests.inc(name)
        self.request_duration.observe(latency_seconds, name)

    def record_bytes_in(self, count: int) -> None:
        self.bytes_in.inc(amount=count)

    def record_bytes_out(self, count: int) -> None:
        self.bytes_out.inc(amount=count)

    def record_connection_opened(self) -> None:
        self.connections.add(1)

    def record_connection_closed(self, reason: CloseReason) -> None:
        self.connections.add(-1)
        self.connections_closed.inc(reason.value)

    def record_connection_refused(self, reason: str) -> None:
        self.connections_refused.inc(reason)

    def record_acceptor_blocked(self) -> None:
        self.acceptor_blocked.inc()

    # --- gauges owned by other components ---

    def set_broker_state(self, state: BrokerState) -> None:
        self.broker_state.set(state.value)

    def set_replication_throttle(self, side: str, *, byte_rate: float, total_bytes: int) -> None:
        self.replication_byte_rate.set(byte_rate, side)
        self.replication_bytes.set(total_bytes, side)

    def set_partition_counts(self, *, led: int, under_replicated: int) -> None:
        assert 0 <= under_replicated <= led
        self.partitions_led.set(led)
        self.under_replicated_partitions.set(under_replicated)

    def set_storage_health(
        self, *, offline_replicas: int, offline_log_dirs: int, corrupt_batch_reads: int
    ) -> None:
        assert min(offline_replicas, offline_log_dirs, corrupt_batch_reads) >= 0
        self.offline_replicas.set(offline_replicas)
        self.offline_log_dirs.set(offline_log_dirs)
        self.corrupt_batch_reads.set(corrupt_batch_reads)

    def set_metadata_progress(self, *, applied_offset: int, committed_end_offset: int) -> None:
        """``applied_offset``: the last applied record's offset (-1 before any);
        ``committed_end_offset``: the offset the controller's next committed record will get."""
        self.metadata_offset.set(applied_offset)
        self.metadata_lag.set(max(0, committed_end_offset - applied_offset - 1))

    def record_client_quota_throttle(self, quota_type: str, throttle_ms: int) -> None:
        self.client_quota_throttles.inc(quota_type)
        self.client_quota_throttle_time.inc(quota_type, amount=throttle_ms)

    def render(self) -> str:
        return self.registry.render()
