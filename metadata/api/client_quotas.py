"""The client quota route of the controller's HTTP API (KIP-546's AlterClientQuotas): types
and JSON codec.

The request is the pure controller's input (``quorum.managers.client_quotas``), so a broker
forwarding Kafka's AlterClientQuotas and an operator's tool send the same thing::

  POST /v1/client-quotas
    {"entries": [{"entity": [{"entity_type": "user", "entity_name": "alice" | null}],
                  "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": false}]}],
     "validate_only": false}
    -> {"entries": [{"entity": [...], "error": "NONE", "message": null}]}

  POST /v1/client-quotas/describe
    {"components": [{"entity_type": "user", "match_type": "EXACT" | "DEFAULT" | "SPECIFIED",
                     "match": "alice" | null}], "strict": false}
    -> {"entries": [{"entity": [...], "values": {"producer_byte_rate": 1048576.0}}]}
    (a filter Kafka refuses: the error body, INVALID_REQUEST or UNSUPPORTED_VERSION)

An entity's parts are a map in Kafka (``AlterClientQuotasRequest.entries`` puts each part by its
type, a repeated type keeping the last name); a null ``entity_name`` is the default entity.
``value`` is ignored when ``remove`` is true. The describe route is for operators; brokers
answer Kafka's DescribeClientQuotas from their own image, as Kafka's brokers do
(``ClientQuotasImage.describe``); both use ``metadata.client_quotas.describe_client_quotas``.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.client_quotas import (
    FilterComponent,
    MatchType,
    QuotaEntity,
    quota_entity,
)

# Bounds (STYLE.md §7): a batch holds at most 10,000 records (MAX_RECORDS_PER_USER_OP).
MAX_QUOTA_ENTRIES = 1000
MAX_QUOTA_OPS = 100
MAX_FILTER_COMPONENTS = 3  # one per entity type


@attrs.frozen
class QuotaOp:
    """Set ``key`` to ``value``, or remove it (``value`` None): Kafka's
    ``ClientQuotaAlteration.Op``."""

    key: str
    value: float | None


@attrs.frozen
class QuotaAlteration:
    entity: QuotaEntity
    ops: tuple[QuotaOp, ...]


@attrs.frozen
class AlterClientQuotasRequest:
    entries: tuple[QuotaAlteration, ...]
    validate_only: bool = False


@attrs.frozen
class AlterClientQuotasEntryResult:
    entity: QuotaEntity
    error: ApiError = SUCCESS


@attrs.frozen
class AlterClientQuotasResponse:
    # One per distinct entity, in the order of first mention (Kafka answers from a map).
    entries: tuple[AlterClientQuotasEntryResult, ...]


def _entity_to_json(entity: QuotaEntity) -> list[JsonObject]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity]


def _entity_from_json(fields: Fields) -> QuotaEntity:
    parts: dict[str, str | None] = {}
    for part in fields.objects("entity"):
        parts[part.string("entity_type")] = part.optional_string("entity_name")
    return quota_entity(parts.items())


def _op_from_json(fields: Fields) -> QuotaOp:
    key = fields.string("key")
    if fields.boolean("remove", False):
        return QuotaOp(key, None)
    return QuotaOp(key, fields.number("value"))


def alter_client_quotas_request_to_json(request: AlterClientQuotasRequest) -> JsonObject:
    return {
        "entries": [
            {
                "entity": _entity_to_json(entry.entity),
                "ops": [
                    {"key": op.key, "value": op.value, "remove": op.value is None}
                    for op in entry.ops
                ],
            }
            for entry in request.entries
        ],
        "validate_only": request.validate_only,
    }


def alter_client_quotas_request_from_json(fields: Fields) -> AlterClientQuotasRequest:
    entries = fields.objects("entries")
    if len(entries) > MAX_QUOTA_ENTRIES:
        raise JsonBodyError(f"At most {MAX_QUOTA_ENTRIES} entries per request; got {len(entries)}.")
    alterations = []
    for entry in entries:
        ops = entry.objects("ops")
        if len(ops) > MAX_QUOTA_OPS:
            raise JsonBodyError(f"At most {MAX_QUOTA_OPS} ops per entry; got {len(ops)}.")
        alterations.append(
            QuotaAlteration(_entity_from_json(entry), tuple(_op_from_json(op) for op in ops))
        )
    return AlterClientQuotasRequest(tuple(alterations), fields.boolean("validate_only", False))


def alter_client_quotas_response_to_json(response: AlterClientQuotasResponse) -> JsonObject:
    return {
        "entries": [
            {"entity": _entity_to_json(r.entity), **error_field_to_json(r.error)}
            for r in response.entries
        ]
    }


def alter_client_quotas_response_from_json(fields: Fields) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(
        tuple(
            AlterClientQuotasEntryResult(_entity_from_json(r), error_field_from_json(r))
            for r in fields.objects("entries")
        )
    )


# ------------------------------------------------------------------ describe (operators)


@attrs.frozen
class DescribeClientQuotasRequest:
    components: tuple[FilterComponent, ...]
    strict: bool = False


@attrs.frozen
class DescribeClientQuotasResponse:
    entries: tuple[tuple[QuotaEntity, tuple[tuple[str, float], ...]], ...]


def _match_type_from_json(text: str) -> int:
    try:
        return MatchType[text.upper()].value
    except KeyError:
        names = " or ".join(repr(m.name) for m in MatchType)
        raise JsonBodyError(f"The field 'match_type' must be {names}.") from None


def describe_client_quotas_request_to_json(request: DescribeClientQuotasRequest) -> JsonObject:
    return {
        "components": [
            {
                "entity_type": c.entity_type,
                "match_type": MatchType(c.match_type).name,
                "match": c.match,
            }
            for c in request.components
        ],
        "strict": request.strict,
    }


def describe_client_quotas_request_from_json(fields: Fields) -> DescribeClientQuotasRequest:
    components = fields.objects("components", [])
    if len(components) > MAX_FILTER_COMPONENTS:
        raise JsonBodyError(
            f"At most {MAX_FILTER_COMPONENTS} filter components; got {len(components)}."
        )
    return DescribeClientQuotasRequest(
        tuple(
            FilterComponent(
                c.string("entity_type"),
                _match_type_from_json(c.string("match_type")),
                c.optional_string("match"),
            )
            for c in components
        ),
        fields.boolean("strict", False),
    )


def describe_client_quotas_response_to_json(response: DescribeClientQuotasResponse) -> JsonObject:
    return {
        "entries": [
            {"entity": _entity_to_json(entity), "values": dict(values)}
            for entity, values in response.entries
        ]
    }


def describe_client_quotas_response_from_json(fields: Fields) -> DescribeClientQuotasResponse:
    entries = []
    for entry in fields.objects("entries"):
        values = entry.json_object("values")
        if not all(type(v) in (int, float) for v in values.values()):
            raise JsonBodyError("The values of 'values' must be numbers.")
        entries.append(
            (_entity_from_json(entry), tuple((k, float(v)) for k, v in sorted(values.items())))
        )
    return DescribeClientQuotasResponse(tuple(entries))
