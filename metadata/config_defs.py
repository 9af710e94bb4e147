"""Kafka's config definitions that the controller validates and brokers describe (pure).

Why in ``metadata``: the controller (``quorum/managers/configs.py``) validates every
``ConfigRecord`` against these definitions and the broker (``broker/config_describe.py``)
answers DescribeConfigs from them; both may import ``metadata`` and neither imports the other.

``TOPIC_CONFIGS`` are Kafka's ``LogConfig`` keys with their defaults, validators and (for
DescribeConfigs v3+) documentation; ``TOPIC_CONFIG_SYNONYMS`` names each one's broker default
(Kafka's ``ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS``). The broker keys are in
``broker_config_defs.py``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

import attrs

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type``; ``wire_id`` is DescribeConfigs v3+'s ``config_type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"

    @property
    def wire_id(self) -> int:
        # DescribeConfigsResponse.ConfigType: UNKNOWN 0, BOOLEAN 1, ..., PASSWORD 9.
        return list(ConfigType).index(self) + 1


class ConfigError(ValueError):
    """A value does not parse or is out of range; str() is Kafka's ``ConfigException`` text."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {name}: {reason}")


@attrs.frozen
class ConfigDef:
    """One key of Kafka's ``ConfigDef``: type, default (None: no default), validator, doc."""

    name: str
    type: ConfigType
    default: str | None
    at_least: float | None = None
    at_most: float | None = None
    # For STRING: the value must be one of these; for LIST: every element must be.
    valid_strings: tuple[str, ...] = ()
    documentation: str = ""
    # A broker key pykraft changes at run time (DynamicBrokerConfig); topic keys all are.
    dynamic: bool = True

    @property
    def sensitive(self) -> bool:
        """Kafka's ``KafkaConfig.maybeSensitive``: passwords are never described."""
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> object:
        """Parse and validate ``raw``; raises ConfigError with Kafka's message."""
        value = _parse(self, raw)
        self._check(value)
        return value

    def _check(self, value: object) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.at_least is not None and value < self.at_least:
                raise ConfigError(self.name, value, f"Value must be at least {_num(self.at_least)}")
            if self.at_most is not None and value > self.at_most:
                raise ConfigError(
                    self.name, value, f"Value must be no more than {_num(self.at_most)}"
                )
        if self.valid_strings:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.valid_strings:
                    raise ConfigError(
                        self.name, item, "String must be one of: " + ", ".join(self.valid_strings)
                    )


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _parse(definition: ConfigDef, raw: str) -> object:
    # Kafka's ConfigDef.parseType: values are trimmed; numbers must fit the Java type.
    text = raw.strip()
    kind = definition.type
    if kind is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(definition.name, raw, "Expected value to be either true or false")
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        low, high = (_INT_MIN, _INT_MAX) if kind is not ConfigType.LONG else (_LONG_MIN, _LONG_MAX)
        if _INTEGER.fullmatch(text) and low <= int(text) <= high:
            return int(text)
        raise ConfigError(definition.name, raw, f"Not a number of type {kind.value}")
    if kind is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(definition.name, raw, "Not a number of type DOUBLE") from None
    if kind is ConfigType.LIST:
        return [] if not text else [part.strip() for part in text.split(",")]
    return text


def config_defs(*definitions: ConfigDef) -> Mapping[str, ConfigDef]:
    return {definition.name: definition for definition in definitions}


# KIP-73 replication throttles (reassign-partitions): a topic's throttled replicas are checked as
# Kafka's ThrottledReplicaListValidator does; the rows are at the end of TOPIC_CONFIGS.
_THROTTLED_REPLICA = re.compile(r"[0-9]+:[0-9]+")


@attrs.frozen
class _ThrottledReplicasDef(ConfigDef):
    def _check(self, value: object) -> None:
        items = value if isinstance(value, list) else [value]
        if items == ["*"] or all(_THROTTLED_REPLICA.fullmatch(str(item)) for item in items):
            return
        raise ConfigError(
            self.name,
            ",".join(map(str, items)),
            f"{self.name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )


_T, _L = ConfigType, str(_LONG_MAX)
_POLICIES = ("compact", "delete")
_CODECS = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# Kafka's LogConfig (topic-level configs), with Kafka's defaults and validators.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = config_defs(
    ConfigDef(
        "cleanup.policy",
        _T.LIST,
        "delete",
        valid_strings=_POLICIES,
        documentation="Whether old segments are deleted, compacted, or both.",
    ),
    ConfigDef(
        "compression.type",
        _T.STRING,
        "producer",
        valid_strings=_CODECS,
        documentation="The codec batches are stored with; producer keeps the producer's.",
    ),
    ConfigDef(
        "delete.retention.ms",
        _T.LONG,
        "86400000",
        at_least=0,
        documentation="How long delete tombstones are kept in a compacted topic.",
    ),
    ConfigDef(
        "file.delete.delay.ms",
        _T.LONG,
        "60000",
        at_least=0,
        documentation="How long a deleted segment file waits before it is removed from disk.",
    ),
    ConfigDef(
        "flush.messages",
        _T.LONG,
        _L,
        at_least=1,
        documentation="Messages written before the log is forced to disk.",
    ),
    ConfigDef(
        "flush.ms",
        _T.LONG,
        _L,
        at_least=0,
        documentation="Milliseconds between forced flushes of the log to disk.",
    ),
    ConfigDef(
        "index.interval.bytes",
        _T.INT,
        "4096",
        at_least=0,
        documentation="Bytes of log between two offset index entries.",
    ),
    ConfigDef(
        "max.compaction.lag.ms",
        _T.LONG,
        _L,
        at_least=1,
        documentation="The longest time a message stays uncompacted.",
    ),
    ConfigDef(
        "max.message.bytes",
        _T.INT,
        "1048588",
        at_least=0,
        documentation="The largest record batch the topic accepts.",
    ),
    ConfigDef(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        valid_strings=_TIMESTAMP_TYPES,
        documentation="Whether record timestamps are the producer's or the append time.",
    ),
    ConfigDef(
        "min.cleanable.dirty.ratio",
        _T.DOUBLE,
        "0.5",
        at_least=0,
        at_most=1,
        documentation="The dirty share of a log that makes it eligible for cleaning.",
    ),
    ConfigDef(
        "min.compaction.lag.ms",
        _T.LONG,
        "0",
        at_least=0,
        documentation="The shortest time a message stays uncompacted.",
    ),
    ConfigDef(
        "min.insync.replicas",
        _T.INT,
        "1",
        at_least=1,
        documentation="In-sync replicas an acks=all produce needs, else NOT_ENOUGH_REPLICAS.",
    ),
    ConfigDef(
        "preallocate",
        _T.BOOLEAN,
        "false",
        documentation="Whether segment files are preallocated on disk.",
    ),
    ConfigDef(
        "retention.bytes",
        _T.LONG,
        "-1",
        documentation="The largest a partition grows "
        "before old segments are deleted; -1: no limit.",
    ),
    ConfigDef(
        "retention.ms",
        _T.LONG,
        "604800000",
        at_least=-1,
        documentation="How long a segment is kept after its last record; -1: forever.",
    ),
    # Kafka 3.x: at least LegacyRecord.RECORD_OVERHEAD_V0 (14 bytes).
    ConfigDef(
        "segment.bytes",
        _T.INT,
        "1073741824",
        at_least=14,
        documentation="The size at which a segment is rolled.",
    ),
    ConfigDef(
        "segment.index.bytes",
        _T.INT,
        "10485760",
        at_least=4,
        documentation="The size of a segment's offset and time indexes.",
    ),
    ConfigDef(
        "segment.jitter.ms",
        _T.LONG,
        "0",
        at_least=0,
        documentation="The most a segment roll is moved earlier at random.",
    ),
    ConfigDef(
        "segment.ms",
        _T.LONG,
        "604800000",
        at_least=1,
        documentation="The age at which a segment is rolled even when not full.",
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        _T.BOOLEAN,
        "false",
        documentation="Whether a replica outside the ISR may become leader, losing data.",
    ),
    # KIP-73 (see _ThrottledReplicasDef).
    _ThrottledReplicasDef(
        "leader.replication.throttled.replicas",
        _T.LIST,
        "",
        documentation="Replicas (partition:broker, or *) whose leader-side reads are throttled.",
    ),
    _ThrottledReplicasDef(
        "follower.replication.throttled.replicas",
        _T.LIST,
        "",
        documentation="Replicas (partition:broker, or *) whose follower fetches are throttled.",
    ),
)

# A topic key -> the broker key that is its default (ServerTopicConfigSynonyms).
TOPIC_CONFIG_SYNONYMS: Mapping[str, str] = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
