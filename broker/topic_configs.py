"""Which topics' configs a metadata delta changed, and each topic's effective config (pure).

ReplicaManager hands those topics' new ``LogConfig`` to their open logs (Kafka's
``DynamicConfigPublisher`` -> ``LogManager.updateTopicConfig``). A topic's config is its own
overrides over this broker's dynamic broker configs — ``(BROKER, "<id>")`` over the cluster
default ``(BROKER, "")`` — over ``server.properties`` (the log manager's static default) over
Kafka's defaults: Kafka's ``LogConfig.fromProps(currentDefaultConfig.originals, overrides)``,
where ``DynamicLogConfig.reconfigure`` keeps the default current
(``LogManager.reconfigureDefaultLogConfig``). A change of the broker layers reaches every log
without an override of its own. ``min.insync.replicas`` resolves the same way
(``effective_min_insync_replicas``).
"""

from __future__ import annotations

from pykraft.broker.config_describe import BrokerConfigLayers
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigResourceType
from pykraft.storage.log_config import LogConfig

MIN_INSYNC_REPLICAS = "min.insync.replicas"


def changed_topic_configs(delta: MetadataDelta, new_image: MetadataImage) -> frozenset[str]:
    """Topics whose config overrides differ between ``delta``'s base image and ``new_image``
    (the TOPIC resources of Kafka's ``ConfigurationsDelta``). The images are compared, not the
    delta's replayed records: a snapshot delta (``MetadataDelta.between``) replays none."""
    before, after = delta.image.configs.resources, new_image.configs.resources
    if before is after:  # ConfigsDelta.apply keeps the image when no config changed
        return frozenset()
    return frozenset(
        name
        for resource_type, name in {*before.keys(), *after.keys()}
        if resource_type == ConfigResourceType.TOPIC
        and before.get((resource_type, name)) != after.get((resource_type, name))
    )


def dynamic_broker_configs(image: MetadataImage, broker_id: int) -> dict[str, str]:
    """This broker's dynamic configs: its own over the cluster default (the layers of
    ``BrokerConfigLayers.merged`` without the static file)."""
    return BrokerConfigLayers.of(image, broker_id, static={}).merged()


def broker_default_log_config(image: MetadataImage, broker_id: int, static: LogConfig) -> LogConfig:
    """Every log's default on this broker: the dynamic broker configs over the static one.
    The controller validated the values (raises ``LogConfigError`` if storage disagrees)."""
    return LogConfig.from_properties(dynamic_broker_configs(image, broker_id), defaults=static)


def effective_min_insync_replicas(
    image: MetadataImage, topic: str, broker_id: int, static: int
) -> int:
    """The topic's override, else this broker's dynamic config, else the cluster default,
    else ``server.properties``' (``static``); the controller validated every value."""
    value = image.configs.config(ConfigResourceType.TOPIC, topic).get(MIN_INSYNC_REPLICAS)
    if value is None:
        value = dynamic_broker_configs(image, broker_id).get(MIN_INSYNC_REPLICAS)
    return static if value is None else int(value)
