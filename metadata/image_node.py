"""The metadata image as a tree of named nodes, for ``pykraft metadata-shell``.

Mirrors Kafka's ``org.apache.kafka.image.node`` package (``MetadataImageNode`` and its
children): ``/image`` has ``provenance``, ``features``, ``cluster``, ``topics``, ``configs``,
``clientQuotas``, ``producerIds``, ``acls``, ``scram`` and ``delegationToken``; a topic lives at
``/image/topics/byName/<name>`` and ``/image/topics/byId/<id>`` with ``name``, ``id`` and one leaf
per partition; a broker at ``/image/cluster/brokers/<id>``; a config value at
``/image/configs/TOPIC:<name>/<key>`` (a resource's cluster default is ``BROKER`` alone).

Directories compute their children when asked, so a 100,000-partition image costs nothing until
someone lists it. Leaves hold one line of text, shaped like the ``toString()`` of Kafka's value
classes (``PartitionRegistration(replicas=[1, 2], ...)``) so output reads as Kafka's does.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

import attrs

from pykraft.metadata.auth.acl import AclBinding
from pykraft.metadata.auth.images import ScramImage
from pykraft.metadata.client_quotas import QuotaEntity
from pykraft.metadata.delegation_tokens import TokenInformation
from pykraft.metadata.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigsImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pykraft.metadata.records import BrokerEndpoint

# Kafka's SecurityProtocol names by id (BrokerEndpoint.security_protocol).
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}
# Kafka's ConfigResource.Type names by id (ConfigRecord.resource_type).
CONFIG_RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS"}
METADATA_VERSION_FEATURE = "metadata.version"


@attrs.frozen
class Leaf:
    """A file: one line of text (Kafka's ``MetadataLeafNode``)."""

    text: str

    def is_directory(self) -> bool:
        return False


@attrs.frozen(eq=False)
class Directory:
    """A directory whose children are computed on demand (Kafka's ``MetadataNode``)."""

    children: Callable[[], Mapping[str, Callable[[], Node]]]

    def is_directory(self) -> bool:
        return True

    def child_names(self) -> list[str]:
        """Sorted, as every Kafka shell command sorts them."""
        return sorted(self.children())

    def child(self, name: str) -> Node | None:
        make = self.children().get(name)
        return None if make is None else make()


Node: TypeAlias = Leaf | Directory


def directory(entries: Mapping[str, Callable[[], Node]]) -> Directory:
    return Directory(lambda: entries)


def leaves(values: Mapping[str, str]) -> Directory:
    return directory({name: _leaf(text) for name, text in values.items()})


def _leaf(text: str) -> Callable[[], Node]:
    return lambda: Leaf(text)


def image_node(image: MetadataImage, provenance_time: str | None = None) -> Directory:
    """``/image``: Kafka's ``MetadataImageNode`` over our ``MetadataImage``."""
    return directory(
        {
            "provenance": lambda: Leaf(_provenance(image, provenance_time)),
            "features": lambda: _features(image.features),
            "cluster": lambda: _cluster(image.cluster),
            "topics": lambda: _topics(image.topics),
            "configs": lambda: _configs(image.configs),
            "clientQuotas": lambda: _client_quotas(image.client_quotas.entities),
            "producerIds": lambda: leaves(
                {"nextProducerId": str(image.producer_ids.next_producer_id)}
            ),
            "acls": lambda: _acls(image.acls.acls),
            "scram": lambda: _scram(image.scram),
            "delegationToken": lambda: _tokens(image.delegation_tokens.tokens),
        }
    )


def _provenance(image: MetadataImage, time: str | None) -> str:
    # Kafka's ProvenanceNode: "offset N, epoch E, time <ISO>"; a live image has no log time.
    text = f"offset {image.offset}, epoch {image.epoch}"
    return text if time is None else f"{text}, time {time}"


def _features(features: Mapping[str, int]) -> Directory:
    values = {"metadataVersion": str(features.get(METADATA_VERSION_FEATURE, 0))}
    for name, level in features.items():
        if name != METADATA_VERSION_FEATURE:
            values[f"finalized_{name}"] = str(level)
    return leaves(values)


def _cluster(cluster: ClusterImage) -> Directory:
    brokers = {
        str(broker_id): _leaf(broker_text(broker)) for broker_id, broker in cluster.brokers.items()
    }
    # Controllers register no records here (the quorum's voters are in DescribeQuorum).
    return directory({"brokers": lambda: directory(brokers), "controllers": lambda: directory({})})


def _topics(topics: TopicsImage) -> Directory:
    return Directory(
        lambda: {
            "byName": lambda: _topic_index(topics.by_name),
            "byId": lambda: _topic_index(topics.by_id),
        }
    )


def _topic_index(index: Mapping[str, TopicImage]) -> Directory:
    def children() -> dict[str, Callable[[], Node]]:
        return {key: _topic_maker(topic) for key, topic in index.items()}

    return Directory(children)


def _topic_maker(topic: TopicImage) -> Callable[[], Node]:
    return lambda: topic_node(topic)


def topic_node(topic: TopicImage) -> Directory:
    """Kafka's ``TopicImageNode``: ``name``, ``id`` and one leaf per partition."""

    def children() -> dict[str, Callable[[], Node]]:
        entries = {"name": _leaf(topic.name), "id": _leaf(topic.topic_id)}
        for partition_id, partition in topic.partitions.items():
            entries[str(partition_id)] = _leaf(partition_text(partition))
        return entries

    return Directory(children)


def _configs(configs: ConfigsImage) -> Directory:
    entries: dict[str, Callable[[], Node]] = {}
    for (resource_type, resource_name), values in configs.resources.items():
        type_name = CONFIG_RESOURCE_TYPES.get(resource_type, str(resource_type))
        name = type_name if resource_name == "" else f"{type_name}:{resource_name}"
        entries[name] = _values_maker(values)
    return directory(entries)


def _values_maker(values: Mapping[str, str]) -> Callable[[], Node]:
    return lambda: leaves(values)


def quota_entity_name(entity: QuotaEntity) -> str:
    """Kafka's ``ClientQuotasImageNode.clientQuotaEntityToString``: clientId, ip, user order."""
    parts = dict(entity)
    names = []
    for entity_type, label in (("client-id", "clientId"), ("ip", "ip"), ("user", "user")):
        if entity_type in parts:
            names.append(f"{label}({_escape(parts[entity_type] or '')})")
    return "_".join(names)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _client_quotas(entities: Mapping[QuotaEntity, Mapping[str, float]]) -> Directory:
    return directory(
        {
            quota_entity_name(entity): _values_maker(
                {key: str(value) for key, value in quotas.items()}
            )
            for entity, quotas in entities.items()
        }
    )


def _acls(acls: Mapping[str, AclBinding]) -> Directory:
    return directory({acl_id: _leaf(acl_text(acl)) for acl_id, acl in acls.items()})


def _scram(scram: ScramImage) -> Directory:
    by_mechanism: dict[str, dict[str, str]] = {}
    for user, credentials in scram.users.items():
        for mechanism, credential in credentials.items():
            name = mechanism.name.replace("_", "-")
            # Kafka's ScramCredentialDataNode never shows the salt or keys in a shell.
            by_mechanism.setdefault(name, {})[user] = (
                "ScramCredentialData(salt=[redacted], storedKey=[redacted], "
                f"serverKey=[redacted], iterations={credential.iterations})"
            )
    return directory({name: _values_maker(users) for name, users in by_mechanism.items()})


def _tokens(tokens: Mapping[str, TokenInformation]) -> Directory:
    return directory({token_id: _leaf(token_text(token)) for token_id, token in tokens.items()})


# ---------------------------------------------------------------------------- leaf text


def _ints(values: Iterable[int]) -> str:
    return "[" + ", ".join(str(value) for value in values) + "]"


def partition_text(partition: PartitionRegistration) -> str:
    return (
        f"PartitionRegistration(replicas={_ints(partition.replicas)}, "
        f"isr={_ints(partition.isr)}, "
        f"removingReplicas={_ints(partition.removing_replicas)}, "
        f"addingReplicas={_ints(partition.adding_replicas)}, "
        f"elr={_ints(partition.elr)}, "
        f"lastKnownElr={_ints(partition.last_known_elr)}, "
        f"leader={partition.leader}, "
        f"leaderRecoveryState={partition.leader_recovery_state.name}, "
        f"leaderEpoch={partition.leader_epoch}, "
        f"partitionEpoch={partition.partition_epoch})"
    )


def _endpoint_text(endpoint: BrokerEndpoint) -> str:
    protocol = SECURITY_PROTOCOLS.get(endpoint.security_protocol, str(endpoint.security_protocol))
    return (
        f"Endpoint(listenerName='{endpoint.name}', securityProtocol={protocol}, "
        f"host='{endpoint.host}', port={endpoint.port})"
    )


def broker_text(broker: BrokerRegistration) -> str:
    listeners = ", ".join(_endpoint_text(endpoint) for endpoint in broker.endpoints)
    features = ", ".join(
        f"{feature.name}: {feature.min_supported_version}-{feature.max_supported_version}"
        for feature in sorted(broker.features, key=lambda feature: feature.name)
    )
    rack = "Optional.empty" if broker.rack is None else f"Optional[{broker.rack}]"
    return (
        f"BrokerRegistration(id={broker.id}, epoch={broker.epoch}, "
        f"incarnationId={broker.incarnation_id}, listeners=[{listeners}], "
        f"supportedFeatures={{{features}}}, rack={rack}, "
        f"fenced={str(broker.fenced).lower()}, "
        f"inControlledShutdown={str(broker.in_controlled_shutdown).lower()})"
    )


def acl_text(acl: AclBinding) -> str:
    return (
        f"StandardAcl(resourceType={acl.resource_type.name}, resourceName={acl.resource_name}, "
        f"patternType={acl.pattern_type.name}, principal={acl.principal}, host={acl.host}, "
        f"operation={acl.operation.name}, permissionType={acl.permission_type.name})"
    )


def token_text(token: TokenInformation) -> str:
    return (
        f"DelegationTokenData(tokenInformation=TokenInformation(tokenId={token.token_id}, "
        f"owner={token.owner}, tokenRequester={token.requester}, "
        f"renewers={list(token.renewers)}, issueTimestamp={token.issue_timestamp_ms}, "
        f"expiryTimestamp={token.expiry_timestamp_ms}, maxTimestamp={token.max_timestamp_ms}))"
    )
