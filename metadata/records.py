"""KRaft metadata record types as immutable values.

Each class mirrors one of Kafka's metadata record schemas
(``metadata/src/main/resources/common/metadata/<Name>.json`` in Kafka's source): the field names
are the snake_case of Kafka's field names, the sentinel values are Kafka's (``leader = -2`` means
"no change" in a ``PartitionChangeRecord``, ``-1`` means "no leader"), and ``TYPE_ID`` is Kafka's
``apiKey`` for the record. ``VERSION`` is the version of *pykraft's* JSON shape for the record
(see ``metadata.codec``), not Kafka's binary schema version; only the fields pykraft uses are kept
(no ZK migration or directory fields).

Kafka's *tagged* fields are the last fields of a class and default to empty: the KIP-966
``eligible_leader_replicas`` / ``last_known_elr`` of ``PartitionRecord`` (``()``) and
``PartitionChangeRecord`` (``None``, "unchanged"). Both codecs leave a tagged field out when it
holds its default and read an absent one as the default (``record_schema.Field.tagged``), so a
record without ELR state is written exactly as before and older files read unchanged.

All classes are keyword-only (``PartitionRecord(partition_id=0, topic_id=..., ...)``) so that a
call site reads like the record it builds and a field can never be passed in the wrong slot.

Identifiers: ``topic_id`` and ``incarnation_id`` are strings in Kafka's ``Uuid.toString()`` form —
22 characters of URL-safe base64 without padding of the 16 uuid bytes (``uuid_to_kafka_string``
converts); the codec rejects topic ids that are not in that form, so an id is spelled the same in
the log, the admin API and the Kafka protocol. ACL ids are spelled the same way.

Kafka's ``bytes`` fields (a SCRAM credential's salt and keys) are ``bytes`` here and standard
base64 in both JSON codecs, as Kafka's own JSON converters write them.
"""

from __future__ import annotations

import base64
import enum
from typing import ClassVar, TypeAlias

import attrs

# PartitionChangeRecord.leader: keep the current leader (Kafka's LeaderConstants.NO_LEADER_CHANGE).
NO_LEADER_CHANGE = -2
# A partition with no leader (Kafka's LeaderConstants.NO_LEADER).
NO_LEADER = -1
# PartitionChangeRecord.leader_recovery_state: keep the current state (Kafka's NO_CHANGE).
NO_LEADER_RECOVERY_STATE_CHANGE = -1


class LeaderRecoveryState(enum.IntEnum):
    """Kafka's ``org.apache.kafka.metadata.LeaderRecoveryState`` (KIP-704)."""

    RECOVERED = 0
    # After an unclean election the new leader must recover before the partition takes writes.
    RECOVERING = 1


class BrokerRegistrationFencingChange(enum.IntEnum):
    """Values of ``BrokerRegistrationChangeRecord.fenced`` (Kafka's enum of the same name)."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class BrokerRegistrationInControlledShutdownChange(enum.IntEnum):
    """Values of ``BrokerRegistrationChangeRecord.in_controlled_shutdown``."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


class ConfigResourceType(enum.IntEnum):
    """``ConfigRecord.resource_type`` values (Kafka's ``ConfigResource.Type`` ids)."""

    TOPIC = 2
    BROKER = 4
    CLIENT_METRICS = 16  # KIP-714 subscriptions (metadata/client_metrics_configs.py)


def uuid_to_kafka_string(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, padding stripped."""
    if len(raw) != 16:
        raise ValueError(f"a uuid is 16 bytes, got {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def kafka_string_to_uuid(text: str) -> bytes:
    """Inverse of ``uuid_to_kafka_string``; raises ValueError for anything else."""
    if len(text) != 22:
        raise ValueError(f"a Kafka uuid string has 22 characters, got {len(text)}: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError as exc:  # binascii.Error is a ValueError
        raise ValueError(f"not URL-safe base64: {text!r}") from exc
    if uuid_to_kafka_string(raw) != text:
        # Non-canonical spellings (stray low bits in the last character) would give one uuid
        # two names; Kafka's Uuid.fromString round-trips, so we insist on the canonical form.
        raise ValueError(f"not a canonical Kafka uuid string: {text!r}")
    return raw


@attrs.frozen(kw_only=True)
class BrokerEndpoint:
    """One listener of a broker (``RegisterBrokerRecord.EndPoints``)."""

    name: str
    host: str
    port: int
    # Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL.
    security_protocol: int = 0


@attrs.frozen(kw_only=True)
class BrokerFeature:
    """A feature range a broker supports (``RegisterBrokerRecord.Features``)."""

    name: str
    min_supported_version: int
    max_supported_version: int


@attrs.frozen(kw_only=True)
class RegisterBrokerRecord:
    TYPE_ID: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0

    broker_id: int
    incarnation_id: str
    broker_epoch: int
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@attrs.frozen(kw_only=True)
class UnregisterBrokerRecord:
    TYPE_ID: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int


@attrs.frozen(kw_only=True)
class TopicRecord:
    TYPE_ID: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0

    name: str
    topic_id: str


@attrs.frozen(kw_only=True)
class PartitionRecord:
    TYPE_ID: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0

    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED.value
    leader_epoch: int = 0
    partition_epoch: int = 0
    # KIP-966 (tagged fields 1 and 2 of Kafka's PartitionRecord.json): replicas that may lead
    # cleanly although out of the ISR, and the last known ELR members.
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class ConfigRecord:
    TYPE_ID: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0

    resource_type: int
    resource_name: str
    name: str
    # None deletes the key (Kafka: "The value of the configuration, or null if it should be
    # deleted").
    value: str | None


@attrs.frozen(kw_only=True)
class PartitionChangeRecord:
    """A change to one partition; ``None`` / sentinel fields mean "unchanged".

    Replaying it bumps ``partition_epoch`` by one always, and ``leader_epoch`` by one whenever
    ``leader`` is not ``NO_LEADER_CHANGE`` (Kafka's ``PartitionRegistration.merge``).
    """

    TYPE_ID: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0

    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int = NO_LEADER_RECOVERY_STATE_CHANGE
    # KIP-966 (tagged fields 6 and 7 of Kafka's PartitionChangeRecord.json): None = unchanged.
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@attrs.frozen(kw_only=True)
class FenceBrokerRecord:
    TYPE_ID: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0

    id: int
    epoch: int


@attrs.frozen(kw_only=True)
class UnfenceBrokerRecord:
    TYPE_ID: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0

    id: int
    epoch: int


@attrs.frozen(kw_only=True)
class RemoveTopicRecord:
    TYPE_ID: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0

    topic_id: str


@attrs.frozen(kw_only=True)
class FeatureLevelRecord:
    TYPE_ID: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0

    name: str
    # Level 0 removes the feature (Kafka's FeaturesDelta.replay).
    feature_level: int


@attrs.frozen(kw_only=True)
class ProducerIdsRecord:
    TYPE_ID: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    # The first producer id of the *next* block to hand out.
    next_producer_id: int


@attrs.frozen(kw_only=True)
class BrokerRegistrationChangeRecord:
    TYPE_ID: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0

    broker_id: int
    broker_epoch: int
    fenced: int = BrokerRegistrationFencingChange.NONE.value
    in_controlled_shutdown: int = BrokerRegistrationInControlledShutdownChange.NONE.value


@attrs.frozen(kw_only=True)
class UserScramCredentialRecord:
    """One user's SCRAM credential for one mechanism (KIP-554; Kafka's record of the same name,
    apiKey 11). Holds what RFC 5802 lets a server keep — salt, StoredKey, ServerKey and the
    iteration count — never a password nor the salted password (``metadata.auth.scram``)."""

    TYPE_ID: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0

    name: str
    # Kafka's ScramMechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
    mechanism: int
    salt: bytes = attrs.field(repr=False)
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int


@attrs.frozen(kw_only=True)
class AccessControlEntryRecord:
    """One ACL (KIP-801; Kafka's record of the same name, apiKey 18); codes are those of
    ``metadata.auth.acl`` (Kafka's ResourceType, PatternType, AclOperation, AclPermissionType)."""

    TYPE_ID: ClassVar[int] = 18
    VERSION: ClassVar[int] = 0

    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@attrs.frozen(kw_only=True)
class RemoveAccessControlEntryRecord:
    TYPE_ID: ClassVar[int] = 19
    VERSION: ClassVar[int] = 0

    id: str


@attrs.frozen(kw_only=True)
class RemoveUserScramCredentialRecord:
    TYPE_ID: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0

    name: str
    mechanism: int


@attrs.frozen(kw_only=True)
class ClientQuotaEntityData:
    """One part of a client quota entity (``ClientQuotaRecord.EntityData``): ``entity_type`` is
    ``user``, ``client-id`` or ``ip``; ``entity_name`` None is that type's default entity."""

    entity_type: str
    entity_name: str | None


@attrs.frozen(kw_only=True)
class ClientQuotaRecord:
    """Sets or removes one quota key of one client quota entity (KIP-546; Kafka's record of the
    same name, apiKey 14). ``value`` is ignored when ``remove`` is set."""

    TYPE_ID: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0

    entity: tuple[ClientQuotaEntityData, ...]
    key: str
    value: float = 0.0
    remove: bool = False


@attrs.frozen(kw_only=True)
class NoOpRecord:
    TYPE_ID: ClassVar[int] = 20
    VERSION: ClassVar[int] = 0


# A delegation token, without its HMAC (KIP-48, KIP-373; metadata.delegation_tokens).
@attrs.frozen(kw_only=True)
class DelegationTokenRecord:
    TYPE_ID: ClassVar[int] = 10
    VERSION: ClassVar[int] = 0
    owner: str  # principal strings (User:alice)
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int
    token_id: str


@attrs.frozen(kw_only=True)
class RemoveDelegationTokenRecord:
    TYPE_ID: ClassVar[int] = 26
    VERSION: ClassVar[int] = 0
    token_id: str


MetadataRecord: TypeAlias = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ProducerIdsRecord
    | BrokerRegistrationChangeRecord
    | NoOpRecord
    | UserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | RemoveUserScramCredentialRecord
    | ClientQuotaRecord
    | DelegationTokenRecord
    | RemoveDelegationTokenRecord
)

RECORD_CLASSES: tuple[type[MetadataRecord], ...] = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    TopicRecord,
    PartitionRecord,
    ConfigRecord,
    PartitionChangeRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    RemoveTopicRecord,
    FeatureLevelRecord,
    ProducerIdsRecord,
    BrokerRegistrationChangeRecord,
    NoOpRecord,
    UserScramCredentialRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    ClientQuotaRecord,
    DelegationTokenRecord,
    RemoveDelegationTokenRecord,
)
