"""The broker's metrics, in Kafka's names, and the hooks that feed them (``GET /metrics``).

Kafka's metrics are named as the Prometheus JMX exporter's Kafka rules (``kafka-2_0_0.yml``,
``lowercaseOutputName: true``) name Kafka's MBeans: a gauge ``kafka.server:type=ReplicaManager,
name=UnderReplicatedPartitions`` → ``kafka_server_replicamanager_underreplicatedpartitions``;
a meter's ``Count`` (``…PerSec``) → ``kafka_<domain>_<type>_<name without PerSec>_total``; a
histogram → one gauge per ``quantile`` label plus ``_count`` (here a Prometheus summary, with
``_sum`` too). So dashboards and alerts written for Kafka work unchanged. The per-topic
throughput and ISR change meters are in ``broker/broker_topic_stats.py``; the exposition
primitives in ``metadata/prometheus.py``.

Kept under their old ``pykraft_`` names, because tests read them and Kafka's rules give them no
name or a different meaning: connections (``pykraft_connections``, ``_closed_total``,
``_refused_total``, ``pykraft_acceptor_blocked_total``: tests/hostile/test_connections.py),
``pykraft_offline_replicas`` and ``pykraft_corrupt_batch_reads``
(tests/hostile/test_damaged_files.py; Kafka's ``OfflineReplicaCount`` is exposed too),
``pykraft_metadata_offset`` (tests/integration/test_broker_http.py), the replication throttle
(tests/integration/test_reassignment.py), the client quota throttles
(tests/broker/test_quota_enforcement.py) and ``pykraft_request_duration_seconds`` (a true
histogram: unlike quantiles, its buckets add up across brokers; its ``_count`` by API is the
request count, so no separate counter repeats it: tests/broker/test_http.py); and the network
byte counters and metadata lag, which Kafka's rules do not name.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from pykraft.broker.broker_topic_stats import BrokerTopicStats
from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.log_cleaner_metrics import LogCleanerMetrics
from pykraft.metadata.api.brokers import BrokerTopicCounters
from pykraft.metadata.prometheus import (
    Counter,
    Gauge,
    Histogram,
    MetricsRegistry,
    Summary,
    format_value,
)
from pykraft.protocol.api_keys import ApiKey

__all__ = [
    "BrokerMetrics",
    "CloseReason",
    "Counter",
    "Gauge",
    "Histogram",
    "MetricsRegistry",
    "Summary",
    "api_name",
    "format_value",
]


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


# At most this many (API key, version) pairs keep their series at hand: a client may name any
# pair (an unknown one is still recorded, as "Unknown"), so past it the labels are looked up.
MAX_REQUEST_KINDS = 1024


class _Observed(Protocol):
    def observe(self, value: float) -> None: ...


class _RequestSeries(NamedTuple):
    """What ``record_request`` updates for one (API key, version), looked up once."""

    name: str
    version: str
    duration: _Observed  # pykraft_request_duration_seconds{api=name}
    total_time_ms: _Observed  # kafka_network_requestmetrics_totaltimems{request=name}


class BrokerMetrics:
    """The broker's metrics (Kafka's MBean in brackets); the network listener's hooks.

    Gauges are set by the components that own the numbers (ReplicaManager, MetadataLoader,
    the lifecycle); counters and histograms by the network listener.
    """

    def __init__(self) -> None:
        self.registry = MetricsRegistry()
        self.broker_topic_stats = BrokerTopicStats()
        self.log_cleaner = LogCleanerMetrics()
        # RequestMetrics' RequestsPerSec meter is one MBean per request and version
        # (kafka.network:type=RequestMetrics,name=RequestsPerSec,request=X,version=N), so the
        # JMX exporter's series carry both labels; its timers are per request only.
        self.kafka_requests = Counter(
            "kafka_network_requestmetrics_requests_total",
            "Requests completed, by request name and API version (RequestMetrics "
            "RequestsPerSec; Kafka names Fetch FetchConsumer or FetchFollower).",
            ["request", "version"],
        )
        self.total_time_ms = Summary(
            "kafka_network_requestmetrics_totaltimems",
            "Milliseconds from a request's arrival to its response written, by request name, "
            "over the latest 1028 requests (RequestMetrics TotalTimeMs).",
            ["request"],
        )
        self.request_duration = Histogram(
            "pykraft_request_duration_seconds",
            "Time from a request's arrival to its response written, by API "
            "(RequestMetrics TotalTimeMs).",
            ["api"],
        )
        # Every request updates three families: their series by (API key, version), made once.
        self._request_series: dict[tuple[int, int], _RequestSeries] = {}
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
            "kafka_server_kafkaserver_brokerstate",
            "Kafka BrokerState value: 1 STARTING, 2 RECOVERY, 3 RUNNING, 6 "
            "PENDING_CONTROLLED_SHUTDOWN, 7 SHUTTING_DOWN (KafkaServer BrokerState).",
        )
        self.partitions_led = Gauge(
            "kafka_server_replicamanager_leadercount",
            "Partitions this broker leads (ReplicaManager LeaderCount).",
        )
        self.under_replicated_partitions = Gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Led partitions whose ISR is smaller than their replica set "
            "(ReplicaManager UnderReplicatedPartitions).",
        )
        self.fetch_sessions = Gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchsessions",
            "Incremental fetch sessions this broker keeps (FetchSessionCache "
            "NumIncrementalFetchSessions, KIP-227).",
        )
        self.fetch_session_partitions = Gauge(
            "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
            "Partitions in those sessions (FetchSessionCache NumIncrementalFetchPartitionsCached).",
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
        self.offline_replica_count = Gauge(
            "kafka_server_replicamanager_offlinereplicacount",
            "Replicas on this broker that are offline (ReplicaManager OfflineReplicaCount).",
        )
        self.offline_log_dirs = Gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
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
            *self.broker_topic_stats.families(), self.kafka_requests, self.total_time_ms,
            *self.log_cleaner.families(),
            self.offline_replica_count,
            self.replication_byte_rate, self.replication_bytes,
            self.request_duration, self.bytes_in, self.bytes_out,
            self.connections, self.connections_closed, self.connections_refused,
            self.acceptor_blocked, self.broker_state, self.partitions_led,
            self.under_replicated_partitions, self.metadata_offset, self.metadata_lag,
            self.offline_replicas, self.offline_log_dirs, self.corrupt_batch_reads,
            self.client_quota_throttles, self.client_quota_throttle_time,
            self.fetch_sessions, self.fetch_session_partitions,
        ):  # fmt: skip
            self.registry.register(family)
        self.metadata_offset.set(-1)

    # --- NetworkMetrics hooks (broker.network) ---

    def record_request(self, api_key: int, api_version: int, latency_seconds: float) -> None:
        series = self._request_series.get((api_key, api_version))
        if series is None:
            series = self._series_of_request(api_key, api_version)
        series.duration.observe(latency_seconds)
        self.kafka_requests.inc(series.name, series.version)
        series.total_time_ms.observe(latency_seconds * 1000.0)

    def _series_of_request(self, api_key: int, api_version: int) -> _RequestSeries:
        name = api_name(api_key)
        series = _RequestSeries(
            name,
            str(api_version),
            self.request_duration.series(name),
            self.total_time_ms.series(name),
        )
        if len(self._request_series) < MAX_REQUEST_KINDS:
            self._request_series[api_key, api_version] = series
        return series

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
        self.offline_replica_count.set(offline_replicas)
        self.offline_log_dirs.set(offline_log_dirs)
        self.corrupt_batch_reads.set(corrupt_batch_reads)

    def set_fetch_sessions(self, *, sessions: int, partitions: int) -> None:
        self.fetch_sessions.set(sessions)
        self.fetch_session_partitions.set(partitions)

    def set_metadata_progress(self, *, applied_offset: int, committed_end_offset: int) -> None:
        """``applied_offset``: the last applied record's offset (-1 before any);
        ``committed_end_offset``: the offset the controller's next committed record will get."""
        self.metadata_offset.set(applied_offset)
        self.metadata_lag.set(max(0, committed_end_offset - applied_offset - 1))

    def record_client_quota_throttle(self, quota_type: str, throttle_ms: int) -> None:
        self.client_quota_throttles.inc(quota_type)
        self.client_quota_throttle_time.inc(quota_type, amount=throttle_ms)

    def heartbeat_counters(self) -> BrokerTopicCounters:
        """The all-topics throughput counts each heartbeat carries to the active controller
        (``broker/heartbeat.py``), the same numbers the Prometheus page shows."""
        stats = self.broker_topic_stats
        return BrokerTopicCounters(
            messages_in=stats.messages_in.value(),
            bytes_in=stats.bytes_in.value(),
            bytes_out=stats.bytes_out.value(),
            replication_bytes_in=int(stats.replication_bytes_in.value()),
            replication_bytes_out=int(stats.replication_bytes_out.value()),
            fetch_requests=self.request_duration.count(api_name(ApiKey.FETCH)),
        )

    def render(self) -> str:
        return self.registry.render()
