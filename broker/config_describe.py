"""DescribeConfigs' entries for topics and brokers, from the image and the static file (pure).

Kafka's ``ConfigHelper.describeConfigs`` (``createTopicConfigEntry``, ``createBrokerConfigEntry``,
``configSynonyms``). A broker key's value comes from four layers, most specific first: this
broker's dynamic config (``(BROKER, "<id>")`` in the image, DYNAMIC_BROKER_CONFIG), the
cluster-wide dynamic default (``(BROKER, "")``, DYNAMIC_DEFAULT_BROKER_CONFIG),
``server.properties`` (STATIC_BROKER_CONFIG) and Kafka's default (DEFAULT_CONFIG). A topic key
puts its own override (TOPIC_CONFIG) above the layers of its broker synonym (``retention.ms``
over ``log.retention.ms``). An entry's source is its first synonym's, its synonyms are listed
layer by layer and, within a layer, by the key's unit variants (``log.retention.ms``,
``.minutes``, ``.hours``), and the list starts at the described key itself: Kafka drops the
entries before it (``allSynonyms.dropWhile``). A sensitive (PASSWORD) value is never returned.

``BrokerConfigLayers.merged`` is the one resolution of a broker key's layers: the broker applies
it too (``broker/topic_configs.py``: every log's default config, ``min.insync.replicas``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pykraft.metadata.broker_config_defs import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    broker_config_synonyms,
    broker_value_in,
)
from pykraft.metadata.config_def import ConfigDef
from pykraft.metadata.config_defs import TOPIC_CONFIG_SYNONYMS, TOPIC_CONFIGS
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigResourceType

# Kafka's DescribeConfigsResponse.ConfigSource ids.
TOPIC_CONFIG = 1
DYNAMIC_TOPIC_CONFIG = TOPIC_CONFIG
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6
CLIENT_METRICS_CONFIG = 7

_DEFAULTS: Mapping[str, str] = {
    name: definition.default
    for name, definition in BROKER_CONFIGS.items()
    if definition.default is not None
}


@attrs.frozen
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@attrs.frozen(kw_only=True)
class ConfigEntry:
    """One described config. ``synonyms`` None: the entry is its own only synonym (the
    CreateTopics read-back, which has no synonyms field)."""

    name: str
    value: str | None
    source: int
    read_only: bool = False
    sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] | None = None
    config_type: int = 0  # UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


@attrs.frozen
class BrokerConfigLayers:
    """The layers a broker key's value comes from (not Kafka's defaults, added here)."""

    per_broker: Mapping[str, str]
    cluster_default: Mapping[str, str]
    static: Mapping[str, str]

    @classmethod
    def of(
        cls, image: MetadataImage, broker_id: int, static: Mapping[str, str]
    ) -> BrokerConfigLayers:
        configs = image.configs
        return cls(
            per_broker=configs.config(ConfigResourceType.BROKER, str(broker_id)),
            cluster_default=configs.config(ConfigResourceType.BROKER, ""),
            static=static,
        )

    def merged(self) -> dict[str, str]:
        """The broker's properties as Kafka's ``DynamicBrokerConfig`` sees them: the file,
        overridden by the cluster default, overridden by this broker's own."""
        return {**self.static, **self.cluster_default, **self.per_broker}

    def synonyms(self, name: str, *, per_broker: bool = True) -> list[ConfigSynonym]:
        """Kafka's ``configSynonyms(name, brokerSynonyms(name))``."""
        names = broker_config_synonyms(name)
        definition = BROKER_CONFIGS.get(name)
        sensitive = definition is not None and definition.sensitive
        layers = [
            (self.per_broker, DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG),
            (_DEFAULTS, DEFAULT_CONFIG),
        ]
        found = [
            ConfigSynonym(synonym, None if sensitive else layer[synonym], source)
            for layer, source in layers
            if per_broker or source != DYNAMIC_BROKER_CONFIG
            for synonym in names
            if synonym in layer
        ]
        while found and found[0].name != name:
            found.pop(0)
        return found


def _entry(
    name: str,
    value: str | None,
    synonyms: list[ConfigSynonym],
    definition: ConfigDef | None,
    *,
    read_only: bool,
) -> ConfigEntry:
    sensitive = definition is not None and definition.sensitive
    return ConfigEntry(
        name=name,
        value=None if sensitive else value,
        source=synonyms[0].source if synonyms else DEFAULT_CONFIG,
        read_only=read_only,
        sensitive=sensitive,
        synonyms=tuple(synonyms),
        config_type=0 if definition is None else definition.type.wire_id,
        documentation=None if definition is None else definition.documentation,
    )


def _wanted(name: str, keys: frozenset[str] | None) -> bool:
    return keys is None or name in keys


def broker_entries(
    layers: BrokerConfigLayers, keys: frozenset[str] | None, *, per_broker: bool
) -> tuple[ConfigEntry, ...]:
    """A broker resource: this broker's every known key (``per_broker``), or the cluster
    default resource's keys alone (``currentDynamicDefaultConfigs``)."""
    if per_broker:
        names = sorted(BROKER_CONFIGS)
        merged = {**_DEFAULTS, **layers.merged()}
    else:
        names = sorted(layers.cluster_default)
        merged = dict(layers.cluster_default)
    return tuple(
        _entry(
            name,
            merged.get(name),
            layers.synonyms(name, per_broker=per_broker),
            BROKER_CONFIGS.get(name),
            read_only=name not in DYNAMIC_BROKER_CONFIGS,
        )
        for name in names
        if _wanted(name, keys)
    )


def topic_entries(
    overrides: Mapping[str, str], layers: BrokerConfigLayers, keys: frozenset[str] | None
) -> tuple[ConfigEntry, ...]:
    """A topic resource: every topic key, its override first, then its broker synonym's."""
    merged = layers.merged()
    entries = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        if not _wanted(name, keys):
            continue
        # Keys with no broker default (the KIP-73 throttled-replica lists) have no synonyms
        # past the topic's own (ServerTopicConfigSynonyms lists no such keys).
        broker_name = TOPIC_CONFIG_SYNONYMS.get(name)
        synonyms = layers.synonyms(broker_name) if broker_name is not None else []
        value = overrides.get(name)
        if value is not None:
            synonyms.insert(0, ConfigSynonym(name, value, TOPIC_CONFIG))
        elif broker_name is not None:
            value = broker_value_in(merged, broker_name) or definition.default
        else:
            value = definition.default
        entries.append(_entry(name, value, synonyms, definition, read_only=False))
    return tuple(entries)
