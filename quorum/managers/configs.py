"""Topic and broker configs: Kafka's definitions, validation, and incremental alteration.

Theory of operation. A config resource is ``(resource_type, resource_name)``: a topic by name, a
broker by id, or ``(BROKER, "")`` — the cluster-wide default. The image stores only explicitly
set keys; a key's effective value is the topic's, else the cluster default's (for the few broker
configs that are topic defaults, e.g. ``unclean.leader.election.enable``), else Kafka's static
default. Every value is parsed and range-checked with Kafka's ``ConfigDef`` rules and messages
(``Invalid value 0 for configuration min.insync.replicas: Value must be at least 1``) before any
``ConfigRecord`` is written; ``None`` as a record value deletes the key.

``incremental_alter_configs`` follows Kafka's ``ConfigurationControlManager``: SET, DELETE, and
APPEND/SUBTRACT for list-typed keys; each resource succeeds or fails on its own; the whole
resource's resulting config is validated, not just the changed keys.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

import attrs

from pykraft.metadata.api.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ConfigType(enum.Enum):
    BOOLEAN = "BOOLEAN"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    STRING = "STRING"
    LIST = "LIST"


class ConfigError(ValueError):
    """A value does not parse or is out of range; str() is Kafka's ``ConfigException`` text."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {name}: {reason}")


@attrs.frozen
class ConfigDef:
    """One key of Kafka's ``ConfigDef``: type, default, and an optional validator."""

    name: str
    type: ConfigType
    default: str
    at_least: float | None = None
    at_most: float | None = None
    # For STRING: the value must be one of these; for LIST: every element must be.
    valid_strings: tuple[str, ...] = ()

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
    if kind in (ConfigType.INT, ConfigType.LONG):
        low, high = (_INT_MIN, _INT_MAX) if kind is ConfigType.INT else (_LONG_MIN, _LONG_MAX)
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


def _defs(*definitions: ConfigDef) -> Mapping[str, ConfigDef]:
    return {definition.name: definition for definition in definitions}


# KIP-73 replication throttles (reassign-partitions): a topic's throttled replicas are checked by
# Kafka's ThrottledReplicaListValidator; the rows are at the end of TOPIC_CONFIGS and
# BROKER_CONFIGS (each broker's rates, bytes/s, default Long.MaxValue: unthrottled).
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


_T, _L = ConfigType, _LONG_MAX
# Kafka's LogConfig (topic-level configs), with Kafka's defaults and validators.
TOPIC_CONFIGS: Mapping[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", _T.LIST, "delete", valid_strings=("compact", "delete")),
    ConfigDef(
        "compression.type",
        _T.STRING,
        "producer",
        valid_strings=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    ConfigDef("delete.retention.ms", _T.LONG, "86400000", at_least=0),
    ConfigDef("file.delete.delay.ms", _T.LONG, "60000", at_least=0),
    ConfigDef("flush.messages", _T.LONG, str(_L), at_least=1),
    ConfigDef("flush.ms", _T.LONG, str(_L), at_least=0),
    ConfigDef("index.interval.bytes", _T.INT, "4096", at_least=0),
    ConfigDef("max.compaction.lag.ms", _T.LONG, str(_L), at_least=1),
    ConfigDef("max.message.bytes", _T.INT, "1048588", at_least=0),
    ConfigDef(
        "message.timestamp.type",
        _T.STRING,
        "CreateTime",
        valid_strings=("CreateTime", "LogAppendTime"),
    ),
    ConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", at_least=0, at_most=1),
    ConfigDef("min.compaction.lag.ms", _T.LONG, "0", at_least=0),
    ConfigDef("min.insync.replicas", _T.INT, "1", at_least=1),
    ConfigDef("preallocate", _T.BOOLEAN, "false"),
    ConfigDef("retention.bytes", _T.LONG, "-1"),
    ConfigDef("retention.ms", _T.LONG, "604800000", at_least=-1),
    # Kafka 3.x: at least LegacyRecord.RECORD_OVERHEAD_V0 (14 bytes).
    ConfigDef("segment.bytes", _T.INT, "1073741824", at_least=14),
    ConfigDef("segment.index.bytes", _T.INT, "10485760", at_least=4),
    ConfigDef("segment.jitter.ms", _T.LONG, "0", at_least=0),
    ConfigDef("segment.ms", _T.LONG, "604800000", at_least=1),
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
    # KIP-73 (see _ThrottledReplicasDef).
    _ThrottledReplicasDef("leader.replication.throttled.replicas", _T.LIST, ""),
    _ThrottledReplicasDef("follower.replication.throttled.replicas", _T.LIST, ""),
)

# The dynamic broker configs pykraft accepts, per broker or cluster-wide (resource name "").
BROKER_CONFIGS: Mapping[str, ConfigDef] = _defs(
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
    ConfigDef("min.insync.replicas", _T.INT, "1", at_least=1),
    ConfigDef("log.retention.ms", _T.LONG, "604800000", at_least=-1),
    ConfigDef("log.retention.bytes", _T.LONG, "-1"),
    ConfigDef("log.segment.bytes", _T.INT, "1073741824", at_least=14),
    ConfigDef("log.cleanup.policy", _T.LIST, "delete", valid_strings=("compact", "delete")),
    ConfigDef("message.max.bytes", _T.INT, "1048588", at_least=0),
    # KIP-73: this broker's replication throttle rates (DynamicConfig.Broker).
    ConfigDef("leader.replication.throttled.rate", _T.LONG, str(_LONG_MAX), at_least=0),
    ConfigDef("follower.replication.throttled.rate", _T.LONG, str(_LONG_MAX), at_least=0),
)


def validate_config_map(resource_type: int, configs: Mapping[str, str | None]) -> ApiError:
    """Check a resource's whole resulting config; ``SUCCESS`` or INVALID_CONFIG/INVALID_REQUEST."""
    is_topic = resource_type == ConfigResourceType.TOPIC
    definitions = TOPIC_CONFIGS if is_topic else BROKER_CONFIGS
    nulls = [name for name, value in configs.items() if value is None]
    if nulls and is_topic:
        # Kafka's ControllerConfigurationValidator.
        return ApiError.of(
            Errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
        )
    for name in sorted(configs):
        definition = definitions.get(name)
        if definition is None:
            kind = "topic" if is_topic else "broker"
            return ApiError.of(Errors.INVALID_CONFIG, f"Unknown {kind} config name: {name}")
        value = configs[name]
        if value is None:
            continue
        try:
            definition.parse(value)
        except ConfigError as error:
            return ApiError.of(Errors.INVALID_CONFIG, str(error))
    return SUCCESS


def check_config_resource(image: MetadataImage, resource_type: int, name: str) -> ApiError:
    """Kafka's ``ConfigurationControlManager.checkConfigResource``."""
    if resource_type == ConfigResourceType.TOPIC:
        if name not in image.topics.by_name:
            return ApiError.of(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        return SUCCESS
    if resource_type == ConfigResourceType.BROKER:
        if name == "" or _INTEGER.fullmatch(name):
            return SUCCESS
        return ApiError.of(
            Errors.INVALID_REQUEST, "Illegal non-integral BROKER resource type name."
        )
    return ApiError.of(Errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}.")


def _apply_op(
    resource_type: int, current: str | None, config: AlterableConfig
) -> tuple[str | None, ApiError]:
    if config.op is AlterConfigOp.SET:
        return config.value, SUCCESS
    if config.op is AlterConfigOp.DELETE:
        return None, SUCCESS
    definitions = TOPIC_CONFIGS if resource_type == ConfigResourceType.TOPIC else BROKER_CONFIGS
    definition = definitions.get(config.name)
    if definition is None or definition.type is not ConfigType.LIST:
        return current, ApiError.of(
            Errors.INVALID_CONFIG,
            f"Can't {config.op.name} to key {config.name} because its type is not LIST.",
        )
    parts = [] if not current else [p.strip() for p in current.split(",")]
    for item in (config.value or "").split(","):
        if config.op is AlterConfigOp.APPEND and item not in parts:
            parts.append(item)
        elif config.op is AlterConfigOp.SUBTRACT and item in parts:
            parts.remove(item)
    return ",".join(parts), SUCCESS


def _alter_resource(
    image: MetadataImage, resource: AlterConfigsResource
) -> tuple[list[ConfigRecord], ApiError]:
    error = check_config_resource(image, resource.resource_type, resource.resource_name)
    if error.is_failure():
        return [], error
    existing = image.configs.config(resource.resource_type, resource.resource_name)
    resulting: dict[str, str | None] = dict(existing)
    records: list[ConfigRecord] = []
    for config in resource.configs:
        if config.op is AlterConfigOp.SET and config.value is None:
            return [], ApiError.of(
                Errors.INVALID_REQUEST, f"Null value not supported for {config.name} with op SET."
            )
        new_value, error = _apply_op(resource.resource_type, resulting.get(config.name), config)
        if error.is_failure():
            return [], error
        if new_value != resulting.get(config.name):
            records.append(
                ConfigRecord(
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    name=config.name,
                    value=new_value,
                )
            )
        resulting[config.name] = new_value
    error = validate_config_map(
        resource.resource_type, {k: v for k, v in resulting.items() if v is not None}
    )
    return ([], error) if error.is_failure() else (records, SUCCESS)


def incremental_alter_configs(
    image: MetadataImage, request: IncrementalAlterConfigsRequest
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """Kafka's ``ConfigurationControlManager.incrementalAlterConfigs``."""
    records: list[ConfigRecord] = []
    results: list[AlterConfigsResourceResult] = []
    seen: set[tuple[int, str]] = set()
    for resource in request.resources:
        key = (resource.resource_type, resource.resource_name)
        if key in seen:
            error = ApiError.of(Errors.INVALID_REQUEST, "Duplicate resource in the request.")
            resource_records: list[ConfigRecord] = []
        else:
            resource_records, error = _alter_resource(image, resource)
        seen.add(key)
        results.append(
            AlterConfigsResourceResult(resource.resource_type, resource.resource_name, error)
        )
        if not request.validate_only:
            records.extend(resource_records)
    return ControllerResult(tuple(records), IncrementalAlterConfigsResponse(tuple(results)))


def unclean_leader_election_enabled(
    image: MetadataImage, topic_name: str, cluster_default: bool
) -> bool:
    """Topic config, else the cluster-wide broker default, else the static default."""
    name = "unclean.leader.election.enable"
    for resource_type, resource_name in (
        (ConfigResourceType.TOPIC, topic_name),
        (ConfigResourceType.BROKER, ""),
    ):
        value = image.configs.config(resource_type, resource_name).get(name)
        if value is not None:
            return value.strip().lower() == "true"
    return cluster_default


def effective_topic_configs(image: MetadataImage, topic_name: str) -> dict[str, str]:
    """Every topic config with its effective value (explicit, else Kafka's default)."""
    explicit = image.configs.config(ConfigResourceType.TOPIC, topic_name)
    return {
        name: explicit.get(name, definition.default)
        for name, definition in sorted(TOPIC_CONFIGS.items())
    }
