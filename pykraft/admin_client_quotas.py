"""DescribeClientQuotas and AlterClientQuotas (KIP-546) for ``KafkaAdminClient``: the calls
``pykraft configs --entity-type users|clients`` makes, as Kafka's ``ConfigCommand`` makes them
through ``Admin.describeClientQuotas`` / ``alterClientQuotas``.

An entity is its ``(entity type, name)`` pairs (``user``, ``client-id``; a None name is the
default entity); a filter component matches an exact name, the default (``MatchType`` 1) or any
name (2); ``strict`` leaves out entities with other entity types
(``ClientQuotaFilter.containsOnly``).
Both requests go to any broker (the broker forwards AlterClientQuotas to the controller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pykraft.admin_errors import AdminError
from pykraft.admin_network import AdminNetwork
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2  # DescribeClientQuotasRequest.MatchType
Entity = tuple[tuple[str, str | None], ...]


@attrs.frozen
class QuotaFilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


def encode_describe(
    version: int, components: Sequence[QuotaFilterComponent], strict: bool
) -> bytes:
    component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(
        version=version,
        components=[
            component(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
            for c in components
        ],
        strict=strict,
    )
    return bytes(request.encode(version=version))


def decode_describe(
    body: bytes | memoryview, version: int
) -> tuple[Errors, str | None, dict[Entity, dict[str, float]]]:
    response = DescribeClientQuotasResponse.decode(bytes(body), version=version)
    entries: dict[Entity, dict[str, float]] = {}
    for entry in response.entries or []:
        entity = tuple((e.entity_type, e.entity_name) for e in entry.entity)
        entries[entity] = {v.key: float(v.value) for v in entry.values}
    return Errors(response.error_code), response.error_message, entries


def encode_alter(version: int, entity: Entity, ops: Mapping[str, float | None]) -> bytes:
    entry_type = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        version=version,
        entries=[
            entry_type(
                entity=[entry_type.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                ops=[
                    entry_type.OpData(key=key, value=value or 0.0, remove=value is None)
                    for key, value in ops.items()
                ],
            )
        ],
        validate_only=False,
    )
    return bytes(request.encode(version=version))


def decode_alter(body: bytes | memoryview, version: int) -> list[tuple[Errors, str | None]]:
    response = AlterClientQuotasResponse.decode(bytes(body), version=version)
    return [(Errors(e.error_code), e.error_message) for e in response.entries]


class ClientQuotaCalls:
    def __init__(self, network: AdminNetwork) -> None:
        self._network = network

    async def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent], strict: bool
    ) -> dict[Entity, dict[str, float]]:
        async def attempt() -> dict[Entity, dict[str, float]] | str:
            node = await self._network.any_broker()
            error, message, entries = await self._network.request(
                node,
                ApiKey.DESCRIBE_CLIENT_QUOTAS,
                lambda version: encode_describe(version, components, strict),
                decode_describe,
            )
            if error is not Errors.NONE:
                raise AdminError(message or error.name, error)
            return entries

        return await self._network.retrying("describeClientQuotas", attempt)

    async def alter_client_quotas(self, entity: Entity, ops: Mapping[str, float | None]) -> None:
        """Set (a value) or remove (None) each quota of ``entity``."""

        async def attempt() -> bool | str:
            node = await self._network.any_broker()
            answers = await self._network.request(
                node,
                ApiKey.ALTER_CLIENT_QUOTAS,
                lambda version: encode_alter(version, entity, ops),
                decode_alter,
            )
            for error, message in answers:
                if error is not Errors.NONE:
                    raise AdminError(message or error.name, error)
            return True

        await self._network.retrying("alterClientQuotas", attempt)
