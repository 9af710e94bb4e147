"""The config APIs' requests and responses as small typed values (DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs), read once from and turned once into kafka-python's
objects, as ``admin_requests.py`` / ``admin_responses.py`` do for the topic APIs.

Version rules of the answers: DescribeConfigs lists synonyms only when asked
(``include_synonyms``, v1+) and ``config_type`` / ``documentation`` from v3 (the documentation
only when asked, ``include_documentation``); v0's ``is_default`` is the source being
DEFAULT_CONFIG.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from pykraft.broker.config_describe import ConfigEntry
from pykraft.metadata.api.admin import AlterableConfig, AlterConfigOp, AlterConfigsResource
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_DescribeConfigs: Any = response_class(ApiKey.DESCRIBE_CONFIGS)
_AlterConfigs: Any = response_class(ApiKey.ALTER_CONFIGS)
_IncrementalAlterConfigs: Any = response_class(ApiKey.INCREMENTAL_ALTER_CONFIGS)


@attrs.frozen(kw_only=True)
class DescribeConfigsResource:
    resource_type: int
    resource_name: str
    # None: every config.
    configuration_keys: frozenset[str] | None


@attrs.frozen(kw_only=True)
class DescribeConfigsRequestData:
    version: int
    include_synonyms: bool
    include_documentation: bool
    resources: tuple[DescribeConfigsResource, ...]


@attrs.frozen(kw_only=True)
class ConfigsResult:
    """One resource's DescribeConfigs answer."""

    resource_type: int
    resource_name: str
    error: Errors
    message: str | None = None
    entries: tuple[ConfigEntry, ...] = ()


@attrs.frozen(kw_only=True)
class AlterConfigsRequestData:
    """IncrementalAlterConfigs, or AlterConfigs (``replace``: every op is SET and the given
    configs become the resource's whole set)."""

    version: int
    validate_only: bool
    replace: bool
    resources: tuple[AlterConfigsResource, ...]


@attrs.frozen(kw_only=True)
class AlterResult:
    resource_type: int
    resource_name: str
    error: Errors
    message: str | None = None


def describe_configs_request(message: Any) -> DescribeConfigsRequestData:
    version = message.version
    return DescribeConfigsRequestData(
        version=version,
        include_synonyms=version >= 1 and bool(message.include_synonyms),
        include_documentation=version >= 3 and bool(message.include_documentation),
        resources=tuple(
            DescribeConfigsResource(
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                # ConfigHelper: null or empty asks for every config.
                configuration_keys=frozenset(resource.configuration_keys)
                if resource.configuration_keys
                else None,
            )
            for resource in message.resources
        ),
    )


def _op(raw: int) -> AlterConfigOp | int:
    """Kafka's ``AlterConfigOp.OpType.forId``; an unknown id stays an int (refused later)."""
    try:
        return AlterConfigOp(raw)
    except ValueError:
        return raw


def incremental_alter_configs_request(message: Any) -> AlterConfigsRequestData:
    return AlterConfigsRequestData(
        version=message.version,
        validate_only=bool(message.validate_only),
        replace=False,
        resources=tuple(
            AlterConfigsResource(
                resource.resource_type,
                resource.resource_name,
                tuple(
                    AlterableConfig(config.name, _op(config.config_operation), config.value)  # type: ignore[arg-type]
                    for config in resource.configs
                ),
            )
            for resource in message.resources
        ),
    )


def alter_configs_request(message: Any) -> AlterConfigsRequestData:
    return AlterConfigsRequestData(
        version=message.version,
        validate_only=bool(message.validate_only),
        replace=True,
        resources=tuple(
            AlterConfigsResource(
                resource.resource_type,
                resource.resource_name,
                tuple(
                    AlterableConfig(config.name, AlterConfigOp.SET, config.value)
                    for config in resource.configs
                ),
            )
            for resource in message.resources
        ),
    )


def alter_configs_response(request: AlterConfigsRequestData, results: Sequence[AlterResult]) -> Any:
    message_class = _AlterConfigs if request.replace else _IncrementalAlterConfigs
    result_class = message_class.AlterConfigsResourceResponse
    return message_class(
        version=request.version,
        throttle_time_ms=0,
        responses=[
            result_class(
                error_code=r.error,
                error_message=r.message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in results
        ],
    )


def describe_configs_response(
    request: DescribeConfigsRequestData, results: Sequence[ConfigsResult]
) -> Any:
    result_class = _DescribeConfigs.DescribeConfigsResult
    entry_class = result_class.DescribeConfigsResourceResult
    synonym_class = entry_class.DescribeConfigsSynonym

    def entry(config: ConfigEntry) -> Any:
        synonyms = []
        if request.include_synonyms:
            synonyms = [
                synonym_class(name=s.name, value=s.value, source=s.source)
                for s in config.synonyms or ()
            ]
        return entry_class(
            name=config.name,
            value=config.value,
            read_only=config.read_only,
            config_source=config.source,
            is_default=config.is_default,
            is_sensitive=config.sensitive,
            synonyms=synonyms,
            config_type=config.config_type,
            documentation=config.documentation if request.include_documentation else None,
        )

    return _DescribeConfigs(
        version=request.version,
        throttle_time_ms=0,
        results=[
            result_class(
                error_code=r.error,
                error_message=r.message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[entry(c) for c in r.entries],
            )
            for r in results
        ],
    )
