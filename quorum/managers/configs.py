"""Topic, broker and client-metrics configs: Kafka's definitions, validation, and alteration.

Theory of operation. A config resource is ``(resource_type, resource_name)``: a topic by name, a
broker by id, or ``(BROKER, "")`` — the cluster-wide default, or a KIP-714 metrics subscription
by name (CLIENT_METRICS, ``metadata/client_metrics_configs.py``). The image stores only
explicitly set keys; a key's effective value is the topic's, else the cluster default's (for the
few broker configs that are topic defaults, e.g. ``unclean.leader.election.enable``), else
Kafka's static default. Every value is parsed and range-checked with Kafka's ``ConfigDef`` rules
and messages (``Invalid value 0 for configuration min.insync.replicas: Value must be at least
1``) before any ``ConfigRecord`` is written; ``None`` as a record value deletes the key.

``incremental_alter_configs`` follows Kafka's ``ConfigurationControlManager``: SET, DELETE, and
APPEND/SUBTRACT for list-typed keys; each resource succeeds or fails on its own; the whole
resource's resulting config is validated, not just the changed keys. ``legacy_alter_configs``
(the AlterConfigs API) replaces a resource's whole set. On a broker resource a read-only key is
INVALID_REQUEST "Cannot update these configs dynamically: Set(...)" as Kafka's
``DynamicBrokerConfig.validateConfigs`` says it, a bad value of a known key is INVALID_REQUEST
(``ConfigAdminManager.validateBrokerConfigChange``), and a key Kafka does not know is stored.
The definitions themselves are in ``metadata/config_defs.py``, shared with the brokers'
DescribeConfigs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from pykraft.metadata.api.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    LegacyAlterConfigsRequest,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.broker_config_defs import BROKER_CONFIGS as BROKER_CONFIGS
from pykraft.metadata.broker_config_defs import broker_value_in, non_dynamic_configs, scala_set
from pykraft.metadata.client_metrics_configs import CLIENT_METRICS_CONFIGS, validate_client_metrics
from pykraft.metadata.config_def import ConfigDef, ConfigType
from pykraft.metadata.config_defs import TOPIC_CONFIG_SYNONYMS
from pykraft.metadata.config_defs import TOPIC_CONFIGS as TOPIC_CONFIGS
from pykraft.metadata.config_defs import ConfigError as ConfigError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigRecord, ConfigResourceType
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult

_INTEGER = re.compile(r"[+-]?[0-9]+")


def validate_config_map(
    resource_type: int, configs: Mapping[str, str | None], resource_name: str = ""
) -> ApiError:
    """Check a resource's whole resulting config; ``SUCCESS`` or INVALID_CONFIG/INVALID_REQUEST.

    A topic key must be one of Kafka's ``LogConfig`` keys and its value valid (INVALID_CONFIG).
    A broker resource follows ``ConfigAdminManager.validateBrokerConfigChange``: a key Kafka
    knows must have a valid value, else INVALID_REQUEST (the ``ConfigException`` wrapped,
    KAFKA-13609); a key Kafka does not know is stored as given (``DynamicConfig.Broker.validate``
    with ``customPropsAllowed``: plugins read their own keys). A CLIENT_METRICS subscription
    is ``ClientMetricsConfigs.validate`` (``ControllerConfigurationValidator``)."""
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        return _client_metrics_error(resource_name, configs)
    is_topic = resource_type == ConfigResourceType.TOPIC
    nulls = [name for name, value in configs.items() if value is None]
    if nulls and is_topic:
        # Kafka's ControllerConfigurationValidator.
        return ApiError.of(
            Errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
        )
    if not is_topic:
        # DynamicBrokerConfig.validateConfigs: a key Kafka knows but cannot change live.
        static = non_dynamic_configs(configs)
        if static:
            return ApiError.of(
                Errors.INVALID_REQUEST,
                "Cannot update these configs dynamically: " + scala_set(static),
            )
    definitions = TOPIC_CONFIGS if is_topic else BROKER_CONFIGS
    value_error = Errors.INVALID_CONFIG if is_topic else Errors.INVALID_REQUEST
    for name in sorted(configs):
        definition = definitions.get(name)
        if definition is None:
            if is_topic:
                return ApiError.of(Errors.INVALID_CONFIG, f"Unknown topic config name: {name}")
            continue
        value = configs[name]
        if value is None:
            continue
        try:
            definition.parse(value)
        except ConfigError as error:
            return ApiError.of(value_error, str(error))
    return SUCCESS


def _client_metrics_error(name: str, configs: Mapping[str, str | None]) -> ApiError:
    present = {key: value for key, value in configs.items() if value is not None}
    problem = validate_client_metrics(name, present)
    return SUCCESS if problem is None else ApiError.of(*problem)


def _definitions(resource_type: int) -> Mapping[str, ConfigDef]:
    if resource_type == ConfigResourceType.TOPIC:
        return TOPIC_CONFIGS
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        return CLIENT_METRICS_CONFIGS
    return BROKER_CONFIGS


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
    if resource_type == ConfigResourceType.CLIENT_METRICS:
        return SUCCESS  # the name is checked with the configs (ClientMetricsConfigs.validate)
    return ApiError.of(Errors.INVALID_REQUEST, f"Unsupported resource type {resource_type}.")


def _apply_op(
    resource_type: int, current: str | None, config: AlterableConfig
) -> tuple[str | None, ApiError]:
    if config.op is AlterConfigOp.SET:
        return config.value, SUCCESS
    if config.op is AlterConfigOp.DELETE:
        return None, SUCCESS
    definition = _definitions(resource_type).get(config.name)
    if definition is None or definition.type is not ConfigType.LIST:
        return current, ApiError.of(
            Errors.INVALID_CONFIG,
            f"Can't {config.op.name} to key {config.name} because its type is not LIST.",
        )
    # Kafka's getParts: a key not set is appended to (or subtracted from) its default.
    if current is None:
        current = definition.default
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
        resource.resource_type,
        {k: v for k, v in resulting.items() if v is not None},
        resource.resource_name,
    )
    return ([], error) if error.is_failure() else (records, SUCCESS)


def incremental_alter_configs(
    image: MetadataImage, request: IncrementalAlterConfigsRequest
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """Kafka's ``ConfigurationControlManager.incrementalAlterConfigs``."""
    return _alter_each(image, request.resources, request.validate_only, _alter_resource)


def _alter_each(
    image: MetadataImage,
    resources: Sequence[AlterConfigsResource],
    validate_only: bool,
    alter: Callable[[MetadataImage, AlterConfigsResource], tuple[list[ConfigRecord], ApiError]],
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """Both alter APIs: each resource succeeds or fails on its own; a resource named again is
    INVALID_REQUEST (the broker's preprocess already refused both, an HTTP caller may not)."""
    records: list[ConfigRecord] = []
    results: list[AlterConfigsResourceResult] = []
    seen: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        if key in seen:
            error = ApiError.of(Errors.INVALID_REQUEST, "Duplicate resource in the request.")
            resource_records: list[ConfigRecord] = []
        else:
            resource_records, error = alter(image, resource)
        seen.add(key)
        results.append(
            AlterConfigsResourceResult(resource.resource_type, resource.resource_name, error)
        )
        if not validate_only:
            records.extend(resource_records)
    return ControllerResult(tuple(records), IncrementalAlterConfigsResponse(tuple(results)))


def _replace_resource(
    image: MetadataImage, resource: AlterConfigsResource
) -> tuple[list[ConfigRecord], ApiError]:
    """Kafka's ``ConfigurationControlManager.legacyAlterConfigResource``: the resource's
    configs become exactly the given ones; a key left out is deleted."""
    error = check_config_resource(image, resource.resource_type, resource.resource_name)
    if error.is_failure():
        return [], error
    existing = image.configs.config(resource.resource_type, resource.resource_name)
    wanted: dict[str, str | None] = {config.name: config.value for config in resource.configs}
    error = validate_config_map(resource.resource_type, wanted, resource.resource_name)
    if error.is_failure():
        return [], error

    def record(name: str, value: str | None) -> ConfigRecord:
        return ConfigRecord(
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            name=name,
            value=value,
        )

    records = [record(name, None) for name in sorted(existing) if name not in wanted]
    records += [
        record(name, value) for name, value in wanted.items() if existing.get(name) != value
    ]
    return records, SUCCESS


def legacy_alter_configs(
    image: MetadataImage, request: LegacyAlterConfigsRequest
) -> ControllerResult[IncrementalAlterConfigsResponse]:
    """Kafka's ``ConfigurationControlManager.legacyAlterConfigs`` (the AlterConfigs API):
    each resource's whole set is replaced, each resource succeeds or fails on its own."""
    return _alter_each(image, request.resources, request.validate_only, _replace_resource)


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
    """Every topic config with its effective value as the controller sees it: the topic's,
    else the cluster-wide dynamic default of its broker synonym (``log.retention.ms`` for
    ``retention.ms``), else Kafka's default (the controller has no broker's static file)."""
    explicit = image.configs.config(ConfigResourceType.TOPIC, topic_name)
    cluster_default = image.configs.config(ConfigResourceType.BROKER, "")
    effective = {}
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        value = explicit.get(name)
        broker_name = TOPIC_CONFIG_SYNONYMS.get(name)  # none for KIP-73's replica lists
        if value is None and broker_name is not None:
            value = broker_value_in(cluster_default, broker_name)
        effective[name] = value if value is not None else definition.default or ""
    return effective
