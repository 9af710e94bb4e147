"""``POST /v1/configs``: every resource of one AlterConfigs or IncrementalAlterConfigs request.

Kafka's broker forwards the whole request to the controller, which applies it as one
``ControllerResult`` (``ConfigurationControlManager.incrementalAlterConfigs`` /
``legacyAlterConfigs``): one Raft entry, each resource succeeding or failing on its own. The body
lists the resources, each in the per-resource body's shape (``set`` / ``append`` / ``subtract``
maps, a ``delete`` list; ``replace`` for AlterConfigs, whose configs are all in ``set``); the
answer is a result per resource, in order, with its error name and message. At most
``MAX_BATCH_RESOURCES`` resources: a Kafka request of more is split by the caller.
"""

from __future__ import annotations

from pykraft.metadata.api.admin import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsRequest,
    AlterConfigsResource,
    AlterConfigsResourceResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    LegacyAlterConfigsRequest,
    config_resource_from_path,
)
from pykraft.metadata.api.errors import error_field_from_json, error_field_to_json
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.records import ConfigResourceType

# The most resources one call carries (one Raft entry): a bound on the entry's size.
MAX_BATCH_RESOURCES = 1000

_OP_FIELDS = (
    ("set", AlterConfigOp.SET),
    ("append", AlterConfigOp.APPEND),
    ("subtract", AlterConfigOp.SUBTRACT),
)


def _type_name(resource_type: int) -> str:
    return ConfigResourceType(resource_type).name.lower()


def alter_configs_batch_to_json(request: AlterConfigsRequest) -> JsonObject:
    resources = []
    for resource in request.resources:
        body: JsonObject = {
            "resource_type": _type_name(resource.resource_type),
            "resource_name": resource.resource_name,
        }
        for field, op in _OP_FIELDS:
            body[field] = {c.name: c.value for c in resource.configs if c.op is op}
        body["delete"] = [c.name for c in resource.configs if c.op is AlterConfigOp.DELETE]
        resources.append(body)
    return {
        "resources": resources,
        "validate_only": request.validate_only,
        "replace": isinstance(request, LegacyAlterConfigsRequest),
    }


def _resource_from_json(fields: Fields) -> AlterConfigsResource:
    kind = config_resource_from_path(fields.string("resource_type"))
    changes = [
        AlterableConfig(name, op, value)
        for field, op in _OP_FIELDS
        for name, value in fields.nullable_string_map(field, {}).items()
    ]
    changes += [
        AlterableConfig(name, AlterConfigOp.DELETE) for name in fields.strings("delete", [])
    ]
    return AlterConfigsResource(kind.value, fields.string("resource_name"), tuple(changes))


def alter_configs_batch_from_json(fields: Fields) -> AlterConfigsRequest:
    listed = fields.objects("resources")
    if len(listed) > MAX_BATCH_RESOURCES:
        raise JsonBodyError(f"At most {MAX_BATCH_RESOURCES} resources in one request.")
    resources = tuple(_resource_from_json(resource) for resource in listed)
    validate_only = fields.boolean("validate_only", False)
    if fields.boolean("replace", False):
        if any(c.op is not AlterConfigOp.SET for r in resources for c in r.configs):
            raise JsonBodyError("A replace request names its configs in 'set' only.")
        return LegacyAlterConfigsRequest(resources=resources, validate_only=validate_only)
    return IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only)


def alter_configs_results_to_json(response: IncrementalAlterConfigsResponse) -> JsonObject:
    return {
        "results": [
            {
                "resource_type": _type_name(result.resource_type),
                "resource_name": result.resource_name,
                **error_field_to_json(result.error),
            }
            for result in response.results
        ]
    }


def alter_configs_results_from_json(fields: Fields) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(
        tuple(
            AlterConfigsResourceResult(
                config_resource_from_path(result.string("resource_type")).value,
                result.string("resource_name"),
                error_field_from_json(result),
            )
            for result in fields.objects("results")
        )
    )
