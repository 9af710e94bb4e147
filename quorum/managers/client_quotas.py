"""Client quotas in the metadata log (KIP-546; Kafka's ``ClientQuotaControlManager``).

AlterClientQuotas: one result per distinct entity, in order of first mention. An entity's
alterations are checked as Kafka checks them, and an entity that fails gets INVALID_REQUEST and
no records (the others still apply, in one batch):

- an empty entity: "Invalid empty client quota entity"; a type other than ``user``,
  ``client-id``, ``ip``: "Unhandled client quota entity type: <type>"; an empty name (null is
  the default entity, "" is nothing): "Empty <type> not supported";
- ``ip`` with ``user`` or ``client-id``: "Invalid quota entity combination ..."; an ``ip`` name
  that is not an address: "<ip> is not a valid IP or resolvable host." — pykraft takes IP
  literals only, since a pure controller resolves no names (Kafka's ``InetAddress.getByName``
  would also accept a host name that resolves);
- a key the entity's types do not have (``QuotaConfig.userAndClientQuotaConfigs``:
  producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate;
  ``ipConfigs``: connection_creation_rate): "Invalid configuration key <key>";
- a value ≤ 0: "Quota <key> must be greater than 0" (NaN or infinite: "... must be a finite
  number", pykraft's own); a fractional value for an integral key
  (the byte rates are LONG, connection_creation_rate INT): "<key> cannot be a fractional
  value."; too large for its type: "Proposed value for <key> is too large for a LONG.";
- the same key twice in one entity: "Duplicate quota key <key> ..."; the same entity twice in
  one request: "Ignoring duplicate entity <entity>" (the first mention's records stand, as in
  Kafka, whose results are a map keyed by entity).

Only changes are written (a set to the current value writes nothing; a removal of an absent key
writes nothing). ``validate_only`` answers the same and writes nothing
(``QuorumController.alterClientQuotas``).
"""

from __future__ import annotations

import enum
import ipaddress
import math

from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasEntryResult,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    QuotaAlteration,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.client_quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    ENTITY_TYPES,
    IP,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    QuotaEntity,
    entity_data,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ClientQuotaRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult


class QuotaType(enum.Enum):
    """The ``ConfigDef`` type of a quota key, and the largest value it holds."""

    DOUBLE = ("DOUBLE", math.inf)
    INT = ("an INT", 2**31 - 1)
    LONG = ("a LONG", 2**63 - 1)


USER_AND_CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: QuotaType.LONG,
    CONSUMER_BYTE_RATE: QuotaType.LONG,
    REQUEST_PERCENTAGE: QuotaType.DOUBLE,
    CONTROLLER_MUTATION_RATE: QuotaType.DOUBLE,
}
IP_KEYS = {CONNECTION_CREATION_RATE: QuotaType.INT}
# Kafka's epsilon for "integral" (ClientQuotaControlManager.getErrorForIntegralQuotaValue).
_INTEGRAL_EPSILON = 1e-6


def _invalid(message: str) -> ApiError:
    return ApiError.of(Errors.INVALID_REQUEST, message)


def _describe(entity: QuotaEntity) -> str:
    """Kafka's ``ClientQuotaEntity.toString``."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"


def _keys_for(entity: QuotaEntity) -> dict[str, QuotaType] | ApiError:
    """``validateEntity`` and ``configKeysForEntityType``."""
    if not entity:
        return _invalid("Invalid empty client quota entity")
    for entity_type, name in entity:
        if entity_type not in ENTITY_TYPES:
            return _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            return _invalid(f"Empty {entity_type} not supported")
    parts = dict(entity)
    if IP not in parts:
        return USER_AND_CLIENT_KEYS
    if USER in parts or CLIENT_ID in parts:
        return _invalid(
            "Invalid quota entity combination, IP entity should not be combined with User or "
            "ClientId"
        )
    address = parts[IP]
    if address is not None and not _is_ip_literal(address):
        return _invalid(f"{address} is not a valid IP or resolvable host.")
    return IP_KEYS


def _is_ip_literal(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def _value_error(keys: dict[str, QuotaType], key: str, value: float) -> ApiError:
    """``validateQuotaKeyValue``."""
    quota_type = keys.get(key)
    if quota_type is None:
        return _invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        # pykraft's own: Kafka would store NaN or infinity; no quota means either, and the
        # metadata log's JSON has no spelling for them.
        return _invalid(f"Quota {key} must be a finite number")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    if quota_type is QuotaType.DOUBLE:
        return SUCCESS
    article_name, maximum = quota_type.value
    if value > maximum:
        return _invalid(f"Proposed value for {key} is too large for {article_name}.")
    if abs(math.fmod(value, 1.0)) > _INTEGRAL_EPSILON:
        return _invalid(f"{key} cannot be a fractional value.")
    return SUCCESS


def _alter_entity(
    image: MetadataImage, alteration: QuotaAlteration
) -> tuple[ApiError, list[ClientQuotaRecord]]:
    """``alterClientQuotaEntity``: the entity's error, or its records."""
    seen: set[str] = set()
    for op in alteration.ops:
        if op.key in seen:
            return _invalid(
                f"Duplicate quota key {op.key} not updating quota for this entity "
                f"{_describe(alteration.entity)}"
            ), []
        seen.add(op.key)
    keys = _keys_for(alteration.entity)
    if isinstance(keys, ApiError):
        return keys, []
    current = image.client_quotas.quotas(alteration.entity)
    records = []
    parts = entity_data(alteration.entity)
    for op in alteration.ops:
        if op.value is None:
            if op.key in current:
                records.append(ClientQuotaRecord(entity=parts, key=op.key, remove=True))
            continue
        error = _value_error(keys, op.key, op.value)
        if error.is_failure():
            return error, []
        if current.get(op.key) != op.value:
            records.append(ClientQuotaRecord(entity=parts, key=op.key, value=op.value))
    return SUCCESS, records


def alter_client_quotas(
    image: MetadataImage, request: AlterClientQuotasRequest
) -> ControllerResult[AlterClientQuotasResponse]:
    """Kafka's ``ClientQuotaControlManager.alterClientQuotas`` (see the module docstring)."""
    results: dict[QuotaEntity, ApiError] = {}
    records: list[ClientQuotaRecord] = []
    for alteration in request.entries:
        entity = alteration.entity
        if entity in results:
            results[entity] = _invalid(f"Ignoring duplicate entity {_describe(entity)}")
            continue
        results[entity], entity_records = _alter_entity(image, alteration)
        records.extend(entity_records)
    response = AlterClientQuotasResponse(
        tuple(AlterClientQuotasEntryResult(entity, error) for entity, error in results.items())
    )
    return ControllerResult(() if request.validate_only else tuple(records), response)
