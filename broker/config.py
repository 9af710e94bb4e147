"""Configuration of one broker: Kafka's property names, Kafka's defaults.

``BrokerConfig.from_properties`` takes the plain ``Mapping[str, str]`` that ``pykraft/`` parsed
from a ``.properties`` file (broker/ never reads the file itself). Unknown properties are ignored,
as Kafka ignores (and logs) unused ones, so one file can hold controller and broker settings.
Every bad value raises ``BrokerConfigError`` naming the property. The listeners and their
security (``listeners``, ``advertised.listeners``, the protocol map, SSL, SASL, the controller
client's TLS) are parsed by ``config_listeners.py``; this module is the table of the rest.

Properties pykraft adds (Kafka has no equivalent; each is documented on its field):

  controller.quorum.bootstrap.servers  ``127.0.0.1:19093,127.0.0.1:19094`` — the controllers'
                                 HTTP listeners (Kafka 3.9's name, KIP-853; Kafka lists the
                                 controllers' Kafka-protocol endpoints there, pykraft lists their
                                 HTTP API endpoints). If absent, the addresses of
                                 ``controller.quorum.http.voters`` (``id@host:port``, the
                                 controllers' own property) are used.
  http.listener                  ``127.0.0.1:8092`` — the broker's local HTTP API (/healthz,
                                 /metrics, /v1/partitions, /v1/broker). Port 0 picks a free port.
  http.bearer.token              required when ``http.listener`` is not a loopback address
                                 (DESIGN.md §3.6).

Log settings (``log.segment.bytes``, ``log.roll.ms``/``.hours``, ``log.retention.ms``/
``.minutes``/``.hours``, ``log.retention.bytes``, ``log.index.interval.bytes``,
``log.cleanup.policy``, …) become the broker-wide default ``storage.log_config.LogConfig`` in
``log_config``, with Kafka's precedence between the unit variants; a topic's own overrides
(``retention.ms``, ``cleanup.policy``, …) win over them partition by partition.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import attrs

from pykraft.broker.config_listeners import (
    BrokerConfigError,
    Endpoint,
    HostPort,
    advertised_listeners_of,
    controller_tls_settings,
    inter_broker_listener_of,
    inter_broker_mechanism_of,
    list_property,
    listener_security_of,
    listeners_of,
    parse_host_port,
)
from pykraft.broker.connection_quotas import (
    DEFAULT_CONNECTIONS_MAX_IDLE_MS,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    parse_per_ip_overrides,
)
from pykraft.broker.log_cleaner import cleaner_config_of
from pykraft.broker.sasl_config import ListenerSecurity, SecurityProtocol
from pykraft.metadata.auth.authorizer import AuthorizerSettings
from pykraft.metadata.auth.tls_settings import TlsSettings
from pykraft.storage.log_cleaner import CleanerConfig
from pykraft.storage.log_config import LONG_MAX, LogConfig, LogConfigError

# Listeners and their security are parsed in config_listeners.py; its types and error are
# imported from here as they always were.
__all__ = [
    "BROKER_LOG_PROPERTIES",
    "BrokerConfig",
    "BrokerConfigError",
    "Endpoint",
    "HostPort",
    "controller_tls_settings",
    "is_loopback",
]

# Broker-level names of the settings that form LogConfig (KafkaConfig's log.* properties).
BROKER_LOG_PROPERTIES = (
    "log.segment.bytes",
    "log.roll.ms",
    "log.roll.hours",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.flush.interval.ms",
    "log.flush.interval.messages",
    "message.max.bytes",
    "log.cleanup.policy",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
)
# LogConfig's validators name topic-level properties; a broker file sets the broker-level ones.
_TOPIC_TO_BROKER_NAME = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "flush.ms": "log.flush.interval.ms",
    "flush.messages": "log.flush.interval.messages",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
}


@attrs.frozen(kw_only=True)
class BrokerConfig:
    # node.id (KRaft) — broker.id is accepted as an alias when node.id is absent.
    node_id: int
    # controller.quorum.bootstrap.servers: the controllers' HTTP listeners (see module docstring).
    controller_bootstrap_servers: tuple[HostPort, ...]
    # listeners: where the Kafka protocol is served.
    listeners: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    # advertised.listeners: what clients and other brokers are told; defaults to listeners
    # (a listener on port 0 is then advertised with the port it bound).
    advertised_listeners: tuple[Endpoint, ...] = (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    # inter.broker.listener.name: the advertised listener followers fetch from.
    inter_broker_listener_name: str = "PLAINTEXT"
    # Per listener name: listener.security.protocol.map's protocol, its listener.name.<l>.ssl.*
    # and SASL settings (broker.sasl_config); every listener and advertised listener has one.
    listener_security: Mapping[str, ListenerSecurity] = attrs.field(
        factory=lambda: MappingProxyType(
            {
                "PLAINTEXT": ListenerSecurity(
                    listener_name="PLAINTEXT", security_protocol=SecurityProtocol.PLAINTEXT
                )
            }
        )
    )
    # sasl.mechanism.inter.broker.protocol, when the inter-broker listener uses SASL.
    inter_broker_sasl_mechanism: str | None = None
    # connection.failed.authentication.delay.ms (KIP-306): the close after a failed
    # authentication waits this long.
    connection_failed_authentication_delay_ms: int = 100
    # log.dirs (falls back to log.dir, Kafka's default /tmp/kafka-logs).
    log_dirs: tuple[Path, ...] = (Path("/tmp/kafka-logs"),)
    # broker.rack: rack-aware replica placement (KIP-36); None when unset.
    rack: str | None = None
    num_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    # auto.create.topics.enable: Kafka's default, true (issue 13; issue #4 had it off). A
    # Metadata request for a missing topic that allows it (every version before v4) creates the
    # topic with num.partitions and default.replication.factor (Kafka's AutoTopicCreationManager).
    auto_create_topics_enable: bool = True
    # delegation.token.secret.key (or the deprecated delegation.token.master.key): the HMAC
    # key of KIP-48 delegation tokens; unset or empty: tokens are disabled.
    delegation_token_secret_key: str | None = attrs.field(default=None, repr=False)
    socket_request_max_bytes: int = 104_857_600
    # connections.max.idle.ms, max.connections, max.connections.per.ip(.overrides): Kafka's
    # connection limits and defaults (broker.connection_quotas says what each does).
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP
    max_connections_per_ip_overrides: Mapping[str, int] = attrs.field(
        factory=lambda: MappingProxyType({})
    )
    # socket.listen.backlog.size (KIP-764): connections the kernel queues while the acceptor
    # waits at max.connections.
    socket_listen_backlog_size: int = 50
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    # The TLS this broker's controller client uses (controller_tls_settings); None: http.
    controller_tls: TlsSettings | None = None
    num_replica_fetchers: int = 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_min_bytes: int = 1
    replica_fetch_response_max_bytes: int = 10_485_760
    replica_fetch_backoff_ms: int = 1000
    replica_socket_timeout_ms: int = 30_000
    # KIP-227: the broker's incremental fetch sessions (replica.fetch_sessions).
    max_incremental_fetch_session_cache_slots: int = 1000
    replica_high_watermark_checkpoint_interval_ms: int = 5000
    # KIP-73 replication throttles: samples and sample length of the measured rate.
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    # fetch.max.bytes: the broker's cap on one consumer Fetch response (55 MiB).
    fetch_max_bytes: int = 57_671_680
    # quota.window.num / quota.window.size.seconds: the samples client quota rates are
    # measured over (broker.quotas; Kafka's QuotaConfig defaults).
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    group_initial_rebalance_delay_ms: int = 3000
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    # KIP-211: offsets.retention.minutes (7 days) and offsets.retention.check.interval.ms.
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    # The transaction coordinator (TransactionStateManagerConfig / TransactionLogConfig).
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    # transaction.partition.verification.enable (Kafka 3.6+, KIP-890 part 1): a partition
    # leader asks the transaction coordinator before a producer's first transactional write.
    transaction_partition_verification_enable: bool = True
    # authorizer.class.name set (any name: pykraft has one authorizer, Kafka's
    # StandardAuthorizer) turns ACL checks on, with super.users and
    # allow.everyone.if.no.acl.found; None (unset) allows every request, as Kafka without an
    # authorizer does.
    authorizer: AuthorizerSettings | None = None
    # http.listener (pykraft): the local HTTP API; loopback by default (DESIGN.md §3.6).
    # (HostPort is attrs.frozen, in config_listeners.py: a shared default is safe.)
    http_listener: HostPort = HostPort("127.0.0.1", 8092)  # noqa: RUF009
    # http.bearer.token (pykraft): required when http.listener is not loopback.
    http_bearer_token: str | None = None
    # The log.* properties, as the default LogConfig of every partition.
    log_config: LogConfig = attrs.field(factory=LogConfig)
    # log.cleaner.*: the log cleaner (broker/log_cleaner.py).
    log_cleaner: CleanerConfig = attrs.field(factory=CleanerConfig)
    # log.retention.check.interval.ms: how often the log manager deletes what retention allows.
    log_retention_check_interval_ms: int = 300_000
    # log.flush.scheduler.interval.ms (Kafka default Long.MAX_VALUE: never): how often the log
    # manager looks for logs whose flush.ms has passed and flushes them.
    log_flush_scheduler_interval_ms: int = LONG_MAX
    # num.recovery.threads.per.data.dir (Kafka 4.0 default 2, KIP-1030): threads per log dir
    # opening logs at start-up and closing them at shutdown (storage/log_manager.py).
    num_recovery_threads_per_data_dir: int = 2
    # Every property as the file gave it (secrets too: never in repr). DescribeConfigs reports
    # the keys it knows as STATIC_BROKER_CONFIG, beneath the image's dynamic broker configs.
    static_properties: Mapping[str, str] = attrs.field(
        factory=lambda: MappingProxyType({}), repr=False
    )

    @property
    def inter_broker_endpoint(self) -> Endpoint:
        for endpoint in self.advertised_listeners:
            if endpoint.listener_name == self.inter_broker_listener_name:
                return endpoint
        raise AssertionError("validated in from_properties")

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> BrokerConfig:
        """Build and validate a config; raises ``BrokerConfigError`` naming the property."""
        listeners = listeners_of(values)
        advertised = advertised_listeners_of(values, listeners)
        security = listener_security_of(values, listeners + advertised)
        inter_broker_listener_name = inter_broker_listener_of(values, advertised)
        fields: dict[str, object] = {
            "node_id": _node_id(values),
            "controller_bootstrap_servers": _controller_bootstrap(values),
            "controller_tls": controller_tls_settings(values),
            "listeners": listeners,
            "advertised_listeners": advertised,
            "inter_broker_listener_name": inter_broker_listener_name,
            "listener_security": security,
            "inter_broker_sasl_mechanism": inter_broker_mechanism_of(
                values, security[inter_broker_listener_name]
            ),
            "log_dirs": _log_dirs(values),
            "rack": _optional_str(values, "broker.rack"),
            "http_listener": _http_listener(values),
            "http_bearer_token": _optional_str(values, "http.bearer.token"),
            "log_config": _log_config(values),
            "log_cleaner": cleaner_config_of(values),
            "static_properties": MappingProxyType(dict(values)),
            "auto_create_topics_enable": _bool(values, "auto.create.topics.enable", True),
            "delegation_token_secret_key": (
                _optional_str(values, "delegation.token.secret.key")
                or _optional_str(values, "delegation.token.master.key")
            ),
            "transaction_partition_verification_enable": _bool(
                values, "transaction.partition.verification.enable", True
            ),
            "max_connections_per_ip_overrides": _per_ip_overrides(values),
            "authorizer": _authorizer(values),
        }
        for field_name, name, minimum in _INT_PROPERTIES:
            default = attrs.fields_dict(cls)[field_name].default
            assert isinstance(default, int)
            fields[field_name] = _int(values, name, default, minimum)
        config = cls(**fields)  # type: ignore[arg-type]
        _check_relations(config)
        return config


# field, Kafka property, smallest accepted value (KafkaConfig's validators, or 1 for counts
# and intervals Kafka leaves unchecked but that make no sense below 1).
_INT_PROPERTIES: tuple[tuple[str, str, int], ...] = (
    ("num_partitions", "num.partitions", 1),
    ("default_replication_factor", "default.replication.factor", 1),
    ("min_insync_replicas", "min.insync.replicas", 1),
    ("socket_request_max_bytes", "socket.request.max.bytes", 1),
    ("connections_max_idle_ms", "connections.max.idle.ms", 1),
    (
        "connection_failed_authentication_delay_ms",
        "connection.failed.authentication.delay.ms",
        0,
    ),
    ("max_connections", "max.connections", 0),
    ("max_connections_per_ip", "max.connections.per.ip", 0),
    ("socket_listen_backlog_size", "socket.listen.backlog.size", 1),
    ("broker_heartbeat_interval_ms", "broker.heartbeat.interval.ms", 1),
    ("broker_session_timeout_ms", "broker.session.timeout.ms", 1),
    ("num_replica_fetchers", "num.replica.fetchers", 1),
    ("replica_lag_time_max_ms", "replica.lag.time.max.ms", 1),
    ("replica_fetch_wait_max_ms", "replica.fetch.wait.max.ms", 0),
    ("replica_fetch_max_bytes", "replica.fetch.max.bytes", 0),
    ("replica_fetch_min_bytes", "replica.fetch.min.bytes", 1),
    ("replica_fetch_response_max_bytes", "replica.fetch.response.max.bytes", 0),
    ("replica_fetch_backoff_ms", "replica.fetch.backoff.ms", 0),
    ("replica_socket_timeout_ms", "replica.socket.timeout.ms", 1),
    (
        "max_incremental_fetch_session_cache_slots",
        "max.incremental.fetch.session.cache.slots",
        0,
    ),
    (
        "replica_high_watermark_checkpoint_interval_ms",
        "replica.high.watermark.checkpoint.interval.ms",
        1,
    ),
    ("replication_quota_window_num", "replication.quota.window.num", 1),
    ("replication_quota_window_size_seconds", "replication.quota.window.size.seconds", 1),
    ("fetch_max_bytes", "fetch.max.bytes", 1024),
    ("log_retention_check_interval_ms", "log.retention.check.interval.ms", 1),
    ("log_flush_scheduler_interval_ms", "log.flush.scheduler.interval.ms", 1),
    ("num_recovery_threads_per_data_dir", "num.recovery.threads.per.data.dir", 1),
    ("quota_window_num", "quota.window.num", 1),
    ("quota_window_size_seconds", "quota.window.size.seconds", 1),
    ("offsets_topic_num_partitions", "offsets.topic.num.partitions", 1),
    ("offsets_topic_replication_factor", "offsets.topic.replication.factor", 1),
    ("group_initial_rebalance_delay_ms", "group.initial.rebalance.delay.ms", 0),
    ("group_min_session_timeout_ms", "group.min.session.timeout.ms", 0),
    ("group_max_session_timeout_ms", "group.max.session.timeout.ms", 0),
    ("offsets_retention_minutes", "offsets.retention.minutes", 1),
    ("offsets_retention_check_interval_ms", "offsets.retention.check.interval.ms", 1),
    ("transaction_state_log_num_partitions", "transaction.state.log.num.partitions", 1),
    ("transaction_state_log_replication_factor", "transaction.state.log.replication.factor", 1),
    ("transaction_state_log_min_isr", "transaction.state.log.min.isr", 1),
    ("transaction_state_log_segment_bytes", "transaction.state.log.segment.bytes", 1),
    ("transaction_max_timeout_ms", "transaction.max.timeout.ms", 1),
    ("transactional_id_expiration_ms", "transactional.id.expiration.ms", 1),
    (
        "transaction_abort_timed_out_transaction_cleanup_interval_ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        1,
    ),
    (
        "transaction_remove_expired_transaction_cleanup_interval_ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        1,
    ),
)
_INT32_MAX = 2**31 - 1


def _authorizer(values: Mapping[str, str]) -> AuthorizerSettings | None:
    """``authorizer.class.name`` (e.g. Kafka's
    ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``), ``super.users``
    (``User:a;User:b``) and ``allow.everyone.if.no.acl.found`` (default false)."""
    if not (values.get("authorizer.class.name") or "").strip():
        return None
    return AuthorizerSettings.from_config(
        values.get("super.users", ""),
        _bool(values, "allow.everyone.if.no.acl.found", False),
    )


def _check_relations(config: BrokerConfig) -> None:
    """Cross-property rules (KafkaConfig.validateValues and KIP-631's timing)."""
    if config.replica_fetch_wait_max_ms > config.replica_lag_time_max_ms:
        raise BrokerConfigError(
            "replica.fetch.wait.max.ms",
            "must not exceed replica.lag.time.max.ms, or followers drop out of the ISR "
            "while their fetch waits",
        )
    if config.replica_fetch_wait_max_ms > config.replica_socket_timeout_ms:
        raise BrokerConfigError(
            "replica.fetch.wait.max.ms", "must not exceed replica.socket.timeout.ms"
        )
    if config.broker_heartbeat_interval_ms >= config.broker_session_timeout_ms:
        raise BrokerConfigError(
            "broker.heartbeat.interval.ms",
            "must be below broker.session.timeout.ms, or the broker is fenced between beats",
        )
    if config.connection_failed_authentication_delay_ms >= config.connections_max_idle_ms:
        # KafkaConfig: "must be configured to be less than connections.max.idle.ms".
        raise BrokerConfigError(
            "connection.failed.authentication.delay.ms",
            "must be below connections.max.idle.ms",
        )
    if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
        raise BrokerConfigError(
            "group.min.session.timeout.ms", "must not exceed group.max.session.timeout.ms"
        )
    if config.max_connections_per_ip == 0 and not config.max_connections_per_ip_overrides:
        # KafkaConfig: "max.connections.per.ip can be set to zero only if
        # max.connections.per.ip.overrides property is set".
        raise BrokerConfigError(
            "max.connections.per.ip",
            "can be 0 only when max.connections.per.ip.overrides lets some address in",
        )
    if not is_loopback(config.http_listener.host) and not config.http_bearer_token:
        raise BrokerConfigError(
            "http.bearer.token",
            f"required because http.listener binds {config.http_listener.host}, "
            "which is not a loopback address",
        )


def _int(values: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = values.get(name)
    if raw is None:
        return default
    text = raw.strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not digits.isascii() or not digits.isdigit():
        raise BrokerConfigError(name, f"{raw!r} is not an integer")
    value = int(text)
    if value < minimum:
        raise BrokerConfigError(name, f"{value} is below the minimum {minimum}")
    if value > _INT32_MAX and not name.endswith(".ms"):
        raise BrokerConfigError(name, f"{value} does not fit a 32-bit integer")
    return value


def _per_ip_overrides(values: Mapping[str, str]) -> Mapping[str, int]:
    name = "max.connections.per.ip.overrides"
    try:
        return parse_per_ip_overrides(values.get(name, ""))
    except ValueError as error:
        raise BrokerConfigError(name, str(error)) from None


def _bool(values: Mapping[str, str], name: str, default: bool) -> bool:
    raw = values.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise BrokerConfigError(name, f"{raw!r} must be true or false")
    return lowered == "true"


def _optional_str(values: Mapping[str, str], name: str) -> str | None:
    raw = values.get(name)
    return raw.strip() or None if raw is not None else None


def _node_id(values: Mapping[str, str]) -> int:
    if "node.id" not in values and "broker.id" not in values:
        raise BrokerConfigError("node.id", "missing; every KRaft broker needs a node.id")
    node_id = _int(values, "node.id", -1, 0) if "node.id" in values else -1
    broker_id = _int(values, "broker.id", node_id, 0)
    if node_id >= 0 and broker_id != node_id:
        raise BrokerConfigError("broker.id", f"{broker_id} differs from node.id={node_id}")
    return broker_id


def _log_dirs(values: Mapping[str, str]) -> tuple[Path, ...]:
    items = list_property(values, "log.dirs")
    name = "log.dirs"
    if items is None:
        items, name = list_property(values, "log.dir") or ["/tmp/kafka-logs"], "log.dir"
    if not items:
        raise BrokerConfigError(name, "no directory given")
    if len(set(items)) != len(items):
        raise BrokerConfigError(name, "a directory is listed twice")
    return tuple(Path(item) for item in items)


def _controller_bootstrap(values: Mapping[str, str]) -> tuple[HostPort, ...]:
    name = "controller.quorum.bootstrap.servers"
    items = list_property(values, name)
    if items is None:
        voters = list_property(values, "controller.quorum.http.voters")
        if voters is None:
            raise BrokerConfigError(
                name, "missing; list the controllers' HTTP listeners as host:port,..."
            )
        name = "controller.quorum.http.voters"
        items = [_voter_address(item, name) for item in voters]
    if not items:
        raise BrokerConfigError(name, "no controller given")
    return tuple(parse_host_port(item, name) for item in items)


def _voter_address(item: str, name: str) -> str:
    node, separator, address = item.partition("@")
    if not separator or not node.strip().isdigit():
        raise BrokerConfigError(name, f"expected id@host:port, got {item!r}")
    return address


def _http_listener(values: Mapping[str, str]) -> HostPort:
    raw = values.get("http.listener")
    return HostPort("127.0.0.1", 8092) if raw is None else parse_host_port(raw, "http.listener")


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _log_config(values: Mapping[str, str]) -> LogConfig:
    broker_level = {name: values[name] for name in BROKER_LOG_PROPERTIES if name in values}
    try:
        return LogConfig.from_properties(broker_level)
    except LogConfigError as error:
        name = _TOPIC_TO_BROKER_NAME.get(error.name, error.name)
        message = str(error).split(": ", 1)[-1]
        raise BrokerConfigError(name, message) from None
