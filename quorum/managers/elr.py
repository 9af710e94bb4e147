"""KIP-966 eligible leader replicas: when they are on, each topic's min ISR, and the policy
every election of the controller follows.

The ``eligible.leader.replicas.version`` feature (Kafka 4.0+, levels 0-1) switches ELR on: at
level 1 the controller keeps each partition's ELR and LastKnownElr (``partition_change``). What
makes that safe holds at every level, as in Kafka 3.7+: a leader's high watermark stays put
while its ISR is smaller than min ISR (``replica/partition_state.py``). Kafka 4.1
formats new clusters with level 1 ("ELR is enabled by default on new clusters starting 4.1",
Kafka's docs, operations/eligible-leader-replicas). pykraft starts new clusters at 0, as Kafka
4.0 did: Kafka 4.1 can default to 1 because, when ISR and ELR are both empty, its controller
elects the last known leader (``useLastKnownLeaderInBalancedRecovery``) — an unclean election
that pykraft leaves out, so with ELR on a partition whose every eligible replica was killed
(and so restarted without a clean-shutdown epoch) waits offline; with RF 1 that is every
kill -9. ``ControllerSettings.eligible_leader_replicas_version`` 1 makes the first active
controller write level 1 into an empty metadata log (``bootstrap_records``, Kafka's
``kafka-storage format --feature``); ``UpdateFeatures`` (kafka-features) moves it either way on
a running cluster, and a downgrade to 0 clears the fields as each partition next changes
(Kafka's builder with ELR off).

The effective min ISR is ``min(min.insync.replicas, replication factor)`` (Kafka's
``ReplicationControlManager.getTopicEffectiveMinIsr``), ``min.insync.replicas`` being the
topic's config, else the cluster-wide broker config, else the controller's static one. Changing
it for a topic clears that topic's ELR state; changing the cluster-wide value (even to the same
value) clears every partition's (Kafka's docs, same page; ``elr_clearing_records``).

``ElectionPolicy`` is what the managers pass around: called with a topic name it says whether
unclean election is enabled for it (unclean.leader.election.enable), and ``elr(topic, rf)``
gives the ``ElrSettings`` of a build, or None when the feature is off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import attrs

from pykraft.metadata.elr import ELR_FEATURE as ELR_FEATURE
from pykraft.metadata.elr import ELR_MAX_LEVEL as ELR_MAX_LEVEL
from pykraft.metadata.elr import ELR_MIN_LEVEL as ELR_MIN_LEVEL
from pykraft.metadata.elr import elr_enabled
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
)
from pykraft.quorum.managers.configs import unclean_leader_election_enabled
from pykraft.quorum.managers.result import ControllerResult

R = TypeVar("R")

MIN_INSYNC_REPLICAS = "min.insync.replicas"


@attrs.frozen
class ElrSettings:
    """KIP-966 inputs of one partition change: the feature is on for a build given these."""

    # The topic's effective min ISR: min(min.insync.replicas, replication factor).
    min_isr: int
    # Brokers that shut down uncleanly (KIP-966 PreviousBrokerEpoch mismatch): never ELR.
    unclean_shutdown_replicas: tuple[int, ...] = ()


def min_insync_replicas(image: MetadataImage, topic_name: str, static_default: int) -> int:
    """The topic's ``min.insync.replicas``, else the cluster-wide one, else the static one."""
    for resource_type, resource_name in (
        (ConfigResourceType.TOPIC, topic_name),
        (ConfigResourceType.BROKER, ""),
    ):
        value = image.configs.config(resource_type, resource_name).get(MIN_INSYNC_REPLICAS)
        if value is not None:
            return int(value)
    return static_default


@attrs.frozen
class ElectionPolicy:
    """unclean.leader.election.enable per topic, and the ELR settings when the feature is on."""

    unclean_enabled: Callable[[str], bool]
    # topic name -> its min.insync.replicas; None: ELR is off.
    min_isr: Callable[[str], int] | None = None

    def __call__(self, topic_name: str) -> bool:
        return self.unclean_enabled(topic_name)

    def elr(
        self, topic_name: str, replication_factor: int, unclean_shutdown: tuple[int, ...] = ()
    ) -> ElrSettings | None:
        if self.min_isr is None:
            return None
        effective = min(self.min_isr(topic_name), replication_factor)
        return ElrSettings(min_isr=effective, unclean_shutdown_replicas=unclean_shutdown)


def election_policy(
    image: MetadataImage, unclean_default: bool, min_insync_default: int
) -> ElectionPolicy:
    def unclean(topic: str) -> bool:
        return unclean_leader_election_enabled(image, topic, unclean_default)

    def min_isr(topic: str) -> int:
        return min_insync_replicas(image, topic, min_insync_default)

    return ElectionPolicy(unclean, min_isr if elr_enabled(image) else None)


def bootstrap_records(image: MetadataImage, elr_level: int) -> tuple[MetadataRecord, ...]:
    """The feature levels a new cluster starts with, for an empty metadata log; else ()."""
    if image.offset >= 0 or elr_level == 0:
        return ()
    return (FeatureLevelRecord(name=ELR_FEATURE, feature_level=elr_level),)


def clearing_elr_on_min_isr_change(
    image: MetadataImage, result: ControllerResult[R]
) -> ControllerResult[R]:
    """``result`` (an AlterConfigs write) with the ELR clearing its min.insync.replicas
    changes call for appended, in the same atomic batch."""
    changed = [
        (record.resource_type, record.resource_name)
        for record in result.records
        if isinstance(record, ConfigRecord) and record.name == MIN_INSYNC_REPLICAS
    ]
    if not changed:
        return result
    extra = elr_clearing_records(image, changed)
    return attrs.evolve(result, records=(*result.records, *extra)) if extra else result


def elr_clearing_records(
    image: MetadataImage, changed_min_isr: Iterable[tuple[int, str]]
) -> list[MetadataRecord]:
    """Empty ELR and LastKnownElr for the partitions whose min ISR was just set: a topic's
    (resource type TOPIC) or every topic's (the cluster-wide BROKER "" resource)."""
    if not elr_enabled(image):
        return []
    changed = set(changed_min_isr)
    every_topic = (ConfigResourceType.BROKER, "") in changed
    records: list[MetadataRecord] = []
    for name in sorted(image.topics.by_name):
        if not every_topic and (ConfigResourceType.TOPIC, name) not in changed:
            continue
        topic = image.topics.by_name[name]
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            if partition.elr or partition.last_known_elr:
                records.append(
                    PartitionChangeRecord(
                        partition_id=partition_id,
                        topic_id=topic.topic_id,
                        eligible_leader_replicas=() if partition.elr else None,
                        last_known_elr=() if partition.last_known_elr else None,
                    )
                )
    return records
