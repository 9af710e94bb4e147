"""The broker keys pykraft knows and their synonyms (pure): Kafka's ``KafkaConfig`` subset.

``dynamic`` marks the keys of Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` that pykraft
applies live on every broker: the ``log.*`` topic defaults of Kafka's
``DynamicLogConfig.ReconfigurableConfigs`` (only the most specific unit variant of each,
``log.retention.ms`` not ``.hours``), ``min.insync.replicas`` and
``unclean.leader.election.enable``. The rest are read-only (``server.properties`` only):
altering one is INVALID_REQUEST "Cannot update these configs dynamically: Set(...)"
(``DynamicBrokerConfig.validateConfigs``). Kafka makes a few more keys dynamic (thread pools,
listeners, connection quotas) that pykraft cannot change at run time: read-only here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pykraft.metadata.config_def import ConfigDef, ConfigType, config_defs
from pykraft.metadata.config_defs import TOPIC_CONFIG_SYNONYMS, TOPIC_CONFIGS

_T = ConfigType

# A broker key -> its unit variants, most specific first (brokerConfigSynonyms): the first one
# set wins, each scaled to the first one's unit.
_BROKER_UNIT_SYNONYMS: Mapping[str, tuple[tuple[str, int], ...]] = {
    "log.retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "log.roll.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "log.roll.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
}


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's ``DynamicBrokerConfig.brokerConfigSynonyms`` for the keys pykraft knows."""
    for variants in _BROKER_UNIT_SYNONYMS.values():
        names = tuple(variant for variant, _ in variants)
        if name in names:
            return names
    return (name,)


def broker_value_in(properties: Mapping[str, str], name: str) -> str | None:
    """``name``'s value in a broker property map, from its most specific unit variant
    (``log.retention.hours=1`` gives ``log.retention.ms`` 3600000), else None."""
    for variant, scale in _BROKER_UNIT_SYNONYMS.get(name, ((name, 1),)):
        value = properties.get(variant)
        if value is None:
            continue
        if scale == 1:
            return value
        number = int(value.strip())
        return str(number * scale if number >= 0 else number)
    return None


def _dynamic(topic_name: str, documentation: str = "") -> ConfigDef:
    """A dynamic broker default of a topic key: the topic key's type and validator."""
    topic = TOPIC_CONFIGS[topic_name]
    return attrs.evolve(
        topic,
        name=TOPIC_CONFIG_SYNONYMS[topic_name],
        documentation=documentation or topic.documentation,
    )


def _static(name: str, kind: ConfigType, default: str | None, documentation: str) -> ConfigDef:
    return ConfigDef(name, kind, default, documentation=documentation, dynamic=False)


BROKER_CONFIGS: Mapping[str, ConfigDef] = config_defs(
    # Dynamic: DynamicLogConfig's log.* defaults and the two replication ones.
    _dynamic("cleanup.policy"),
    _dynamic("flush.messages"),
    _dynamic("flush.ms"),
    _dynamic("index.interval.bytes"),
    _dynamic("max.message.bytes"),
    _dynamic("min.insync.replicas"),
    _dynamic("retention.bytes"),
    attrs.evolve(_dynamic("retention.ms"), default=None),  # from log.retention.hours
    _dynamic("segment.bytes"),
    _dynamic("segment.index.bytes"),
    attrs.evolve(_dynamic("segment.ms"), default=None),  # from log.roll.hours
    _dynamic("unclean.leader.election.enable"),
    # KIP-73: this broker's replication throttle rates, bytes/s (DynamicConfig.Broker).
    ConfigDef(
        "leader.replication.throttled.rate",
        _T.LONG,
        str(2**63 - 1),
        at_least=0,
        documentation="Bytes/s this broker serves to throttled followers, as leader.",
    ),
    ConfigDef(
        "follower.replication.throttled.rate",
        _T.LONG,
        str(2**63 - 1),
        at_least=0,
        documentation="Bytes/s this broker fetches for throttled replicas, as follower.",
    ),
    # Read-only here (server.properties only).
    _static(
        "log.retention.hours",
        _T.INT,
        "168",
        "Hours a segment is kept (log.retention.ms and .minutes win).",
    ),
    _static(
        "log.retention.minutes", _T.INT, None, "Minutes a segment is kept (log.retention.ms wins)."
    ),
    _static(
        "log.roll.hours", _T.INT, "168", "Hours before a segment is rolled (log.roll.ms wins)."
    ),
    _static(
        "log.retention.check.interval.ms",
        _T.LONG,
        "300000",
        "How often the log manager deletes the segments retention allows it to.",
    ),
    _static(
        "log.flush.scheduler.interval.ms",
        _T.LONG,
        "9223372036854775807",
        "How often the log manager flushes the logs whose flush.ms has passed.",
    ),
    _static("node.id", _T.INT, "-1", "This node's id in the cluster."),
    _static("process.roles", _T.LIST, "", "The roles of this process: broker, controller."),
    _static("listeners", _T.STRING, None, "The addresses the Kafka protocol is served on."),
    _static("advertised.listeners", _T.STRING, None, "The addresses clients are told."),
    _static("inter.broker.listener.name", _T.STRING, None, "The listener followers use."),
    _static("log.dirs", _T.STRING, None, "The directories partition logs are kept in."),
    _static("num.partitions", _T.INT, "1", "Partitions of an automatically created topic."),
    _static(
        "default.replication.factor", _T.INT, "1", "Replicas of an automatically created topic."
    ),
    _static("num.replica.fetchers", _T.INT, "1", "Fetchers per source broker."),
    _static(
        "replica.lag.time.max.ms",
        _T.LONG,
        "30000",
        "How long a follower may lag before it leaves the ISR.",
    ),
    _static(
        "broker.session.timeout.ms",
        _T.INT,
        "9000",
        "How long a broker lives without heartbeats before it is fenced.",
    ),
    _static(
        "broker.heartbeat.interval.ms",
        _T.INT,
        "2000",
        "Milliseconds between heartbeats to the controller.",
    ),
    _static(
        "socket.request.max.bytes", _T.INT, "104857600", "The largest request the broker reads."
    ),
    _static("offsets.topic.num.partitions", _T.INT, "50", "Partitions of __consumer_offsets."),
    _static("offsets.topic.replication.factor", _T.SHORT, "3", "Replicas of __consumer_offsets."),
    _static(
        "offsets.retention.minutes",
        _T.INT,
        "10080",
        "How long committed offsets are kept once their group is empty (KIP-211).",
    ),
    _static(
        "offsets.retention.check.interval.ms",
        _T.LONG,
        "600000",
        "How often the group coordinator looks for expired offsets.",
    ),
    _static(
        "transaction.state.log.replication.factor",
        _T.SHORT,
        "3",
        "Replicas of __transaction_state.",
    ),
    _static(
        "transaction.state.log.min.isr", _T.INT, "2", "min.insync.replicas of __transaction_state."
    ),
    _static(
        "group.initial.rebalance.delay.ms",
        _T.INT,
        "3000",
        "How long a new group waits for more members before its first rebalance.",
    ),
    _static("ssl.keystore.password", _T.PASSWORD, None, "The key store's password."),
    _static("ssl.key.password", _T.PASSWORD, None, "The private key's password."),
    _static("ssl.truststore.password", _T.PASSWORD, None, "The trust store's password."),
)

DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    name for name, definition in BROKER_CONFIGS.items() if definition.dynamic
)


# Keys Kafka changes at run time (DynamicBrokerConfig.AllDynamicConfigs) that pykraft does not:
# thread pools, connection quotas, the cleaner, and topic defaults pykraft has no use for yet.
# Altering one is refused as for a read-only key, rather than stored and ignored.
KAFKA_DYNAMIC_NOT_APPLIED: frozenset[str] = frozenset(
    {
        "background.threads",
        "compression.type",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.message.timestamp.type",
        "log.preallocate",
        "log.roll.jitter.ms",
        "log.segment.delete.delay.ms",
        "max.connection.creation.rate",
        "max.connections",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "metric.reporters",
        "num.io.threads",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "num.replica.fetchers",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
    }
)


def non_dynamic_configs(names: Iterable[str]) -> list[str]:
    """The keys among ``names`` a broker resource may not take (in ``names``' order): Kafka's
    read-only keys, and Kafka's dynamic ones pykraft does not apply live. Unknown keys are not
    among them (a broker resource stores them: Kafka allows custom broker keys)."""
    return [
        name
        for name in names
        if name in KAFKA_DYNAMIC_NOT_APPLIED
        or (name in BROKER_CONFIGS and not BROKER_CONFIGS[name].dynamic)
    ]


def scala_set(names: list[str]) -> str:
    """A Scala ``Set``'s ``toString``, as Kafka 3.9's broker messages print one."""
    return "Set(" + ", ".join(names) + ")"
