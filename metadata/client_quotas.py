"""Client quotas in the metadata image (KIP-546): Kafka's ``ClientQuotasImage`` and
``ClientQuotasDelta``, and DescribeClientQuotas' filter (``ClientQuotasImage.describe``).

A quota entity is a set of (entity type, entity name) parts — ``user``, ``client-id`` and
``ip`` — where a name of None is that type's *default* entity (``/config/users/<default>``).
Here an entity is the tuple of its parts sorted by type, so one entity has one spelling whatever
order a request or record lists its parts in. Each entity holds quota keys (Kafka's
``QuotaConfig``: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``, and for ``ip`` ``connection_creation_rate``) with float values.

Replay (``ClientQuotaDelta.replay``): a ``ClientQuotaRecord`` sets its key, or with ``remove``
drops it — dropping an absent key is no error; an entity whose last key goes is forgotten.

Describe (``ClientQuotasImage.describe``): each filter component names an entity type and
matches it exactly (a name), as the default (``MATCH_TYPE_DEFAULT``), or as any name including
the default (``MATCH_TYPE_SPECIFIED``); an entity matches when it has every component's type
with a matching name and, when ``strict``, no other part. A component that repeats a type or
has an empty type, a match string where its match type forbids one (or none where it needs
one), or ``ip`` combined with ``user`` / ``client-id`` is INVALID_REQUEST; an entity type or
match type Kafka does not know is UNSUPPORTED_VERSION — Kafka's exceptions and messages.
Nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, TypeAlias

import attrs
from immutables import Map

from pykraft.metadata.records import ClientQuotaEntityData, ClientQuotaRecord
from pykraft.protocol.errors import Errors

# Kafka's ClientQuotaEntity.USER / CLIENT_ID / IP.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

# Kafka's QuotaConfig keys.
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# (entity type, entity name or None for the default), sorted by type.
QuotaEntity: TypeAlias = tuple[tuple[str, str | None], ...]


def quota_entity(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical entity of ``parts`` (Kafka's ``ClientQuotaEntity`` is a map)."""
    return tuple(sorted(parts, key=lambda part: part[0]))


def entity_of(record: ClientQuotaRecord) -> QuotaEntity:
    return quota_entity((data.entity_type, data.entity_name) for data in record.entity)


def entity_data(entity: QuotaEntity) -> tuple[ClientQuotaEntityData, ...]:
    return tuple(ClientQuotaEntityData(entity_type=t, entity_name=n) for t, n in entity)


@attrs.frozen
class ClientQuotasImage:
    # Invariant: no entity maps to an empty set of quotas.
    entities: Map[QuotaEntity, Map[str, float]] = attrs.field(factory=Map)

    EMPTY: ClassVar[ClientQuotasImage]

    def quotas(self, entity: QuotaEntity) -> Mapping[str, float]:
        return self.entities.get(entity, Map())

    def to_records(self) -> list[ClientQuotaRecord]:
        """The records that rebuild this image (a snapshot's), in a stable order."""
        records: list[ClientQuotaRecord] = []
        for entity in sorted(self.entities, key=_sort_key):
            quotas = self.entities[entity]
            records.extend(
                ClientQuotaRecord(entity=entity_data(entity), key=key, value=quotas[key])
                for key in sorted(quotas)
            )
        return records


ClientQuotasImage.EMPTY = ClientQuotasImage()


def _sort_key(entity: QuotaEntity) -> tuple[tuple[str, bool, str], ...]:
    # None (the default) sorts before every name.
    return tuple((t, n is not None, n or "") for t, n in entity)


class ClientQuotasDelta:
    def __init__(self, image: ClientQuotasImage) -> None:
        self.image = image
        # entity -> key -> new value, or None when removed.
        self.changes: dict[QuotaEntity, dict[str, float | None]] = {}

    def replay(self, record: ClientQuotaRecord) -> None:
        changes = self.changes.setdefault(entity_of(record), {})
        changes[record.key] = None if record.remove else record.value

    def apply(self) -> ClientQuotasImage:
        if not self.changes:
            return self.image
        entities = self.image.entities.mutate()
        for entity, changes in self.changes.items():
            quotas = entities.get(entity, Map()).mutate()
            for key, value in changes.items():
                if value is not None:
                    quotas[key] = value
                elif key in quotas:
                    del quotas[key]
            if len(quotas):
                entities[entity] = quotas.finish()
            elif entity in entities:
                del entities[entity]
        return ClientQuotasImage(entities.finish())


# ------------------------------------------------------------------ DescribeClientQuotas


class MatchType(enum.IntEnum):
    """``DescribeClientQuotasRequest`` match types (Kafka's ``ClientQuotaFilterComponent``)."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@attrs.frozen
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


@attrs.frozen
class DescribeError:
    """The whole request refused (the response's error code and message, no entries)."""

    error: Errors
    message: str


_NO_NAME = object()


def describe_client_quotas(
    image: ClientQuotasImage, components: Sequence[FilterComponent], strict: bool
) -> list[tuple[QuotaEntity, Mapping[str, float]]] | DescribeError:
    """The entities ``components`` match, sorted, with their quotas; or why the filter is
    refused (``ClientQuotasImage.describe``)."""
    exact: dict[str, str | None] = {}
    of_type: set[str] = set()
    for component in components:
        problem = _component_problem(component, exact, of_type)
        if problem is not None:
            return problem
        if component.match_type == MatchType.SPECIFIED:
            of_type.add(component.entity_type)
        else:
            exact[component.entity_type] = component.match
    mentioned = set(exact) | of_type
    if IP in mentioned and (USER in mentioned or CLIENT_ID in mentioned):
        return DescribeError(
            Errors.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    matched: list[tuple[QuotaEntity, Mapping[str, float]]] = []
    for entity in sorted(image.entities, key=_sort_key):
        if _matches(dict(entity), exact, of_type, strict):
            matched.append((entity, image.entities[entity]))
    return matched


def _component_problem(
    component: FilterComponent, exact: Mapping[str, str | None], of_type: set[str]
) -> DescribeError | None:
    entity_type = component.entity_type
    if not entity_type:
        return DescribeError(Errors.INVALID_REQUEST, "Invalid empty entity type.")
    if entity_type in exact or entity_type in of_type:
        return DescribeError(
            Errors.INVALID_REQUEST,
            f"Entity type {entity_type} cannot appear more than once in the filter.",
        )
    if entity_type not in ENTITY_TYPES:
        return DescribeError(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
    match_type, match = component.match_type, component.match
    if match_type == MatchType.EXACT and match is None:
        return DescribeError(
            Errors.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        )
    if match_type in (MatchType.DEFAULT, MatchType.SPECIFIED) and match is not None:
        name = "MATCH_TYPE_DEFAULT" if match_type == MatchType.DEFAULT else "MATCH_TYPE_SPECIFIED"
        return DescribeError(
            Errors.INVALID_REQUEST, f"Request specified {name}, but also specified a match string."
        )
    if match_type not in tuple(MatchType):
        return DescribeError(Errors.UNSUPPORTED_VERSION, f"Unknown match type {match_type}")
    return None


def _matches(
    parts: Mapping[str, str | None],
    exact: Mapping[str, str | None],
    of_type: set[str],
    strict: bool,
) -> bool:
    if strict and len(parts) != len(exact) + len(of_type):
        return False
    for entity_type, name in exact.items():
        if parts.get(entity_type, _NO_NAME) != name:
            return False
    return all(entity_type in parts for entity_type in of_type)
