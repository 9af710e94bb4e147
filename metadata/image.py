"""The metadata image: an immutable view of the cluster at one metadata offset.

Mirrors Kafka's ``org.apache.kafka.image.MetadataImage``: brokers (``ClusterImage``), topics and
their partitions (``TopicsImage``), configs, finalized feature levels, the producer-id
allocator, ACLs and SCRAM credentials (``metadata.auth.images``), client quotas
(``metadata.client_quotas``), delegation tokens (``metadata.delegation_tokens``). Every
mapping is an ``immutables.Map`` (a hash array mapped trie), so an image made by
``MetadataDelta.apply`` shares every untouched topic, partition and broker with its parent:
changing one partition of a 100,000-partition image costs O(log n), not a copy.

Images are values: compare them with ``==``; hand them to other tasks freely. A
``PartitionRegistration`` changes only through ``merge`` (Kafka's ``PartitionRegistration.merge``),
which holds the epoch rules in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import attrs
from immutables import Map

from pykraft.metadata.auth.images import AclsImage, ScramImage
from pykraft.metadata.client_quotas import ClientQuotasImage
from pykraft.metadata.delegation_tokens import DelegationTokenImage
from pykraft.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    NO_LEADER_RECOVERY_STATE_CHANGE,
    BrokerEndpoint,
    BrokerFeature,
    LeaderRecoveryState,
    PartitionChangeRecord,
    PartitionRecord,
)

# A config resource as ConfigRecord names it: (resource_type, resource_name); "" names the
# cluster-wide default for brokers, as in Kafka.
ConfigResource = tuple[int, str]


@attrs.frozen(kw_only=True)
class BrokerRegistration:
    """One broker incarnation as the controller registered it (Kafka's ``BrokerRegistration``)."""

    id: int
    epoch: int
    incarnation_id: str
    endpoints: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        for endpoint in self.endpoints:
            if endpoint.name == listener_name:
                return endpoint
        return None


@attrs.frozen(kw_only=True)
class PartitionRegistration:
    """Replicas, ISR, leader and epochs of one partition (Kafka's ``PartitionRegistration``)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED
    # Invariant: leader_epoch and partition_epoch never decrease across merges.
    leader_epoch: int = 0
    partition_epoch: int = 0
    # KIP-966: replicas out of the ISR that still hold every acknowledged record (ISR and ELR
    # never overlap), and the last known ELR members (Kafka's ``elr`` / ``lastKnownElr``).
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=record.replicas,
            isr=record.isr,
            removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas,
            leader=record.leader,
            leader_recovery_state=LeaderRecoveryState(record.leader_recovery_state),
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            elr=record.eligible_leader_replicas,
            last_known_elr=record.last_known_elr,
        )

    def to_record(self, topic_id: str, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader=self.leader,
            leader_recovery_state=self.leader_recovery_state.value,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            eligible_leader_replicas=self.elr,
            last_known_elr=self.last_known_elr,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """Apply a ``PartitionChangeRecord`` with Kafka's ``PartitionRegistration.merge`` rules.

        Absent fields keep their value. The partition epoch always goes up by one. The leader
        epoch goes up by one whenever the record carries a leader (even the same one: the
        controller sets it precisely to bump the epoch). The leader recovery state changes only
        when the record carries one; so do the ELR fields (KIP-966).
        """
        if change.leader == NO_LEADER_CHANGE:
            leader, leader_epoch = self.leader, self.leader_epoch
        else:
            leader, leader_epoch = change.leader, self.leader_epoch + 1
        if change.leader_recovery_state == NO_LEADER_RECOVERY_STATE_CHANGE:
            leader_recovery_state = self.leader_recovery_state
        else:
            leader_recovery_state = LeaderRecoveryState(change.leader_recovery_state)
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            removing_replicas=_or(change.removing_replicas, self.removing_replicas),
            adding_replicas=_or(change.adding_replicas, self.adding_replicas),
            leader=leader,
            leader_recovery_state=leader_recovery_state,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            elr=_or(change.eligible_leader_replicas, self.elr),
            last_known_elr=_or(change.last_known_elr, self.last_known_elr),
        )

    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def is_reassigning(self) -> bool:
        return bool(self.removing_replicas or self.adding_replicas)


def _or(new: tuple[int, ...] | None, old: tuple[int, ...]) -> tuple[int, ...]:
    return old if new is None else new


@attrs.frozen(kw_only=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Map[int, PartitionRegistration] = attrs.field(factory=Map)


@attrs.frozen(kw_only=True)
class TopicsImage:
    # Invariant: by_id and by_name hold the same TopicImage objects, keyed two ways.
    by_id: Map[str, TopicImage] = attrs.field(factory=Map)
    by_name: Map[str, TopicImage] = attrs.field(factory=Map)

    EMPTY: ClassVar[TopicsImage]

    def get_topic(self, topic_id: str) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def get_partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def partition_count(self) -> int:
        return sum(len(topic.partitions) for topic in self.by_id.values())

    def contains(self, topic_name: str, partition_id: int) -> bool:
        """Whether the metadata knows this partition: Kafka's ``MetadataCache.contains``."""
        topic = self.by_name.get(topic_name)
        return topic is not None and partition_id in topic.partitions


@attrs.frozen(kw_only=True)
class ClusterImage:
    brokers: Map[int, BrokerRegistration] = attrs.field(factory=Map)

    EMPTY: ClassVar[ClusterImage]

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)


@attrs.frozen(kw_only=True)
class ConfigsImage:
    # Resources with no keys left are dropped, so an empty resource never lingers.
    resources: Map[ConfigResource, Map[str, str]] = attrs.field(factory=Map)

    EMPTY: ClassVar[ConfigsImage]

    def config(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        return self.resources.get((resource_type, resource_name), Map())


@attrs.frozen(kw_only=True)
class ProducerIdsImage:
    # -1 until the first ProducerIdsRecord (Kafka's ProducerIdsImage.EMPTY).
    next_producer_id: int = -1

    EMPTY: ClassVar[ProducerIdsImage]


@attrs.frozen(kw_only=True)
class MetadataImage:
    # Offset of the last record applied, -1 for the empty image; epoch is the Raft term of the
    # batch that held it (Kafka's MetadataProvenance).
    offset: int = -1
    epoch: int = -1
    cluster: ClusterImage = ClusterImage()
    topics: TopicsImage = TopicsImage()
    configs: ConfigsImage = ConfigsImage()
    features: Map[str, int] = attrs.field(factory=Map)
    producer_ids: ProducerIdsImage = ProducerIdsImage()
    acls: AclsImage = AclsImage.EMPTY
    scram: ScramImage = ScramImage.EMPTY
    # KIP-546 client quotas (Kafka's ClientQuotasImage).
    client_quotas: ClientQuotasImage = ClientQuotasImage.EMPTY
    # KIP-48 delegation tokens (Kafka's DelegationTokenImage).
    delegation_tokens: DelegationTokenImage = DelegationTokenImage.EMPTY

    EMPTY: ClassVar[MetadataImage]

    def is_empty(self) -> bool:
        return self == MetadataImage.EMPTY


TopicsImage.EMPTY = TopicsImage()
ClusterImage.EMPTY = ClusterImage()
ConfigsImage.EMPTY = ConfigsImage()
ProducerIdsImage.EMPTY = ProducerIdsImage()
MetadataImage.EMPTY = MetadataImage()
