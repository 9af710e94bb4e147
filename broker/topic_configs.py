"""Which topics' config overrides a metadata delta changed (pure).

ReplicaManager hands those topics' new ``LogConfig`` to their open logs (Kafka's
``DynamicConfigPublisher`` -> ``LogManager.updateTopicConfig``).
"""

from __future__ import annotations

from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigResourceType


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
