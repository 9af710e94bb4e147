"""Kafka's config definitions that the controller validates and brokers describe (pure).

Why in ``metadata``: the controller (``quorum/managers/configs.py``) validates every
``ConfigRecord`` against these definitions and the broker (``broker/config_describe.py``)
answers DescribeConfigs from them; both may import ``metadata`` and neither imports the other.

``TOPIC_CONFIGS`` are Kafka's ``LogConfig`` keys with their defaults, validators and (for
DescribeConfigs v3+) documentation; ``TOPIC_CONFIG_SYNONYMS`` names each one's broker default
(Kafka's ``ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS``). The broker keys are in
``broker_config_defs.py``, the ``ConfigDef`` machinery in ``config_def.py``. Every key Kafka
3.9's ``LogConfig`` accepts is here; those pykraft only stores and describes say so in their
documentation (``_NOT_ACTED_ON``), and ``remote.storage.enable=true`` is refused as Kafka
refuses it when tiered storage is disabled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

from pykraft.metadata.config_def import LONG_MAX, ConfigDef, ConfigType, config_defs
from pykraft.metadata.config_def import ConfigError as ConfigError

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


# Keys Kafka 3.9 accepts that pykraft stores and describes but does not act on: no timestamp
# bounds on appends, no down-conversion (Fetch v0-3 is unsupported), no recompression, no tiered
# storage. Their documentation says so.
_NOT_ACTED_ON = " Stored and described; pykraft does not act on it."
# KIP-390: gzip's levels are Deflater's 1..9, or -1 (Deflater.DEFAULT_COMPRESSION).
_GZIP_DEFAULT_LEVEL = -1
# Kafka's MetadataVersion strings ("0.10.2", "2.8-IV1", "3.0-IV1"): none is refused that Kafka
# accepts; the value is ignored from 3.0 on in Kafka as here.
_VERSION = re.compile(r"[0-9]+(\.[0-9]+){1,3}(-IV[0-9]+)?")


@attrs.frozen
class _GzipLevelDef(ConfigDef):
    """``GzipCompression.LevelValidator``."""

    def _check(self, value: object) -> None:
        assert isinstance(value, int)
        if value != _GZIP_DEFAULT_LEVEL and not 1 <= value <= 9:
            reason = f"Value must be between 1 and 9 or equal to {_GZIP_DEFAULT_LEVEL}"
            raise ConfigError(self.name, value, reason)


@attrs.frozen
class _MessageFormatVersionDef(ConfigDef):
    """``MetadataVersionValidator``: a Kafka version string."""

    def _check(self, value: object) -> None:
        if not _VERSION.fullmatch(str(value)):
            raise ConfigError(self.name, value, f"Version `{value}` is not a valid version")


class _TieredStorageDisabled(ConfigError):
    def __init__(self) -> None:
        ValueError.__init__(
            self,
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )


@attrs.frozen
class _RemoteStorageEnableDef(ConfigDef):
    """``LogConfig.validateRemoteStorageOnlyIfSystemEnabled``: pykraft has no tiered storage,
    so it answers as Kafka with ``remote.log.storage.system.enable=false`` (the default)."""

    def _check(self, value: object) -> None:
        if value is True:
            raise _TieredStorageDisabled()


_T, _L = ConfigType, str(LONG_MAX)
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
    _GzipLevelDef(
        "compression.gzip.level",
        _T.INT,
        str(_GZIP_DEFAULT_LEVEL),
        documentation="The gzip level when compression.type is gzip (KIP-390)." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "compression.lz4.level",
        _T.INT,
        "9",
        at_least=1,
        at_most=17,
        documentation="The lz4 level when compression.type is lz4 (KIP-390)." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "compression.type",
        _T.STRING,
        "producer",
        valid_strings=_CODECS,
        documentation="The codec batches are stored with; producer keeps the producer's.",
    ),
    ConfigDef(
        "compression.zstd.level",
        _T.INT,
        "3",
        at_least=-131072,
        at_most=22,
        documentation="The zstd level when compression.type is zstd (KIP-390)." + _NOT_ACTED_ON,
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
        "local.retention.bytes",
        _T.LONG,
        "-2",
        at_least=-2,
        documentation="Local bytes kept under tiered storage (KIP-405)." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "local.retention.ms",
        _T.LONG,
        "-2",
        at_least=-2,
        documentation="Local time kept under tiered storage (KIP-405)." + _NOT_ACTED_ON,
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
        "message.downconversion.enable",
        _T.BOOLEAN,
        "true",
        documentation="Whether old fetch versions get down-converted batches." + _NOT_ACTED_ON,
    ),
    _MessageFormatVersionDef(
        "message.format.version",
        _T.STRING,
        "3.0-IV1",
        documentation="Deprecated: ignored from Kafka 3.0 on." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "message.timestamp.after.max.ms",
        _T.LONG,
        _L,
        at_least=0,
        documentation="How far past the broker's time a record may be (KIP-937)." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "message.timestamp.before.max.ms",
        _T.LONG,
        _L,
        at_least=0,
        documentation="How far behind the broker's time a record may be (KIP-937)." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "message.timestamp.difference.max.ms",
        _T.LONG,
        _L,
        at_least=0,
        documentation="Deprecated (KIP-937): the largest record timestamp skew." + _NOT_ACTED_ON,
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
        "remote.log.copy.disable",
        _T.BOOLEAN,
        "false",
        documentation="Tiered storage (KIP-950): stop copying to remote." + _NOT_ACTED_ON,
    ),
    ConfigDef(
        "remote.log.delete.on.disable",
        _T.BOOLEAN,
        "false",
        documentation="Tiered storage (KIP-950): delete remote data on disable." + _NOT_ACTED_ON,
    ),
    _RemoteStorageEnableDef(
        "remote.storage.enable",
        _T.BOOLEAN,
        "false",
        documentation="Tiered storage (KIP-405); pykraft has none, so only false is accepted.",
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
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.type": "compression.type",
    "compression.zstd.level": "compression.zstd.level",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
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
