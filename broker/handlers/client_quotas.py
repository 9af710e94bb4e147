"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (KIP-546).

DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster (else the whole answer is
CLUSTER_AUTHORIZATION_FAILED with no entries) and is answered from this broker's metadata image,
as Kafka's ``KafkaApis.handleDescribeClientQuotasRequest`` answers it from its metadata cache
(``ClientQuotasImage.describe``: ``metadata.client_quotas.describe_client_quotas``); a filter it
refuses is the response's error code and message, entries null.

AlterClientQuotas needs ALTER_CONFIGS on the cluster and is forwarded to the active controller
(Kafka forwards it; ``ControllerApis.handleAlterClientQuotas`` authorizes it there): a refusal
answers CLUSTER_AUTHORIZATION_FAILED on every entity, as does a controller that cannot be
reached with its error; otherwise the controller's result per entity
(``quorum.managers.client_quotas``), an entity it leaves out UNKNOWN_SERVER_ERROR (never a
success nobody reported). A repeated entity type inside one entity keeps the last
name, as Kafka's ``AlterClientQuotasRequest.entries`` builds a map.
"""

from __future__ import annotations

import math
from typing import Any

from pykraft.broker.handlers.forwarding import (
    CLUSTER_DENIED,
    bound_handlers,
    forward_to_controller,
)
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasEntryResult,
    AlterClientQuotasRequest,
    QuotaAlteration,
    QuotaOp,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.client_quotas import (
    DescribeError,
    FilterComponent,
    QuotaEntity,
    describe_client_quotas,
    quota_entity,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Describe: Any = response_class(ApiKey.DESCRIBE_CLIENT_QUOTAS)
_Alter: Any = response_class(ApiKey.ALTER_CLIENT_QUOTAS)
# An entity the controller's answer leaves out: a bug there, not a success.
_UNANSWERED = ApiError(
    Errors.UNKNOWN_SERVER_ERROR, "The controller's answer did not include this entity."
)


def client_quota_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    return bound_handlers(
        services,
        {
            ApiKey.DESCRIBE_CLIENT_QUOTAS: describe_client_quotas_handler,
            ApiKey.ALTER_CLIENT_QUOTAS: alter_client_quotas_handler,
        },
    )


async def describe_client_quotas_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    def refused(error: Errors, message: str | None) -> Any:
        return _Describe(
            version=request.version,
            throttle_time_ms=0,
            error_code=int(error),
            error_message=message,
            entries=None,
        )

    if not services.authorizer.authorize_cluster(context, AclOperation.DESCRIBE_CONFIGS):
        return refused(CLUSTER_DENIED.error, CLUSTER_DENIED.message)
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in request.components]
    result = describe_client_quotas(
        services.metadata().client_quotas, components, bool(request.strict)
    )
    if isinstance(result, DescribeError):
        return refused(result.error, result.message)
    entry = _Describe.EntryData
    entries = [
        entry(
            entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[entry.ValueData(key=k, value=quotas[k]) for k in sorted(quotas)],
        )
        for entity, quotas in result
    ]
    return _Describe(
        version=request.version,
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        entries=entries,
    )


def _alteration(wire: Any) -> QuotaAlteration:
    parts: dict[str, str | None] = {}
    for part in wire.entity:
        parts[part.entity_type] = part.entity_name
    ops = tuple(QuotaOp(op.key, None if op.remove else float(op.value)) for op in wire.ops)
    return QuotaAlteration(quota_entity(parts.items()), ops)


def _not_finite(alteration: QuotaAlteration) -> ApiError | None:
    """A NaN or infinite value (the wire's float64 allows them) is refused here, as the
    controller would (``quorum.managers.client_quotas``): JSON cannot carry it there."""
    for op in alteration.ops:
        if op.value is not None and not math.isfinite(op.value):
            return ApiError(Errors.INVALID_REQUEST, f"Quota {op.key} must be a finite number")
    return None


async def alter_client_quotas_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    alterations = tuple(_alteration(entry) for entry in request.entries)
    entities = list(dict.fromkeys(a.entity for a in alterations))
    answer = await forward_to_controller(
        services,
        context,
        AclOperation.ALTER_CONFIGS,
        lambda: _forward(services, alterations, bool(request.validate_only)),
    )
    results = _every(entities, answer) if isinstance(answer, ApiError) else answer
    entry = _Alter.EntryData
    return _Alter(
        version=request.version,
        throttle_time_ms=0,
        entries=[
            entry(
                error_code=int(r.error.error),
                error_message=r.error.message,
                entity=[entry.EntityData(entity_type=t, entity_name=n) for t, n in r.entity],
            )
            for r in results
        ],
    )


async def _forward(
    services: BrokerServices, alterations: tuple[QuotaAlteration, ...], validate_only: bool
) -> tuple[AlterClientQuotasEntryResult, ...]:
    """The controller's answer per entity, in order of first mention; entities refused here
    (``_not_finite``) are not sent. Raises ``ControllerError``."""
    refused: dict[QuotaEntity, ApiError] = {}
    for alteration in alterations:
        error = _not_finite(alteration)
        if error is not None:
            refused.setdefault(alteration.entity, error)
    entities = list(dict.fromkeys(a.entity for a in alterations))
    forwarded = tuple(a for a in alterations if a.entity not in refused)
    answered: dict[QuotaEntity, ApiError] = {}
    if forwarded:
        response = await services.controller.alter_client_quotas(
            AlterClientQuotasRequest(forwarded, validate_only)
        )
        answered = {r.entity: r.error for r in response.entries}
    return tuple(
        AlterClientQuotasEntryResult(e, refused.get(e) or answered.get(e, _UNANSWERED))
        for e in entities
    )


def _every(
    entities: list[QuotaEntity], error: ApiError
) -> tuple[AlterClientQuotasEntryResult, ...]:
    return tuple(AlterClientQuotasEntryResult(entity, error) for entity in entities)
