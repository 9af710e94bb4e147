"""The config APIs: DescribeConfigs answered from this broker's image, AlterConfigs and
IncrementalAlterConfigs checked here and forwarded to the controller.

DescribeConfigs is Kafka's ``ConfigHelper.describeConfigs``: a topic's or a broker's configs
with their sources and synonyms (``broker/config_describe.py``); a broker resource must name
this broker or be empty (the cluster default); BROKER_LOGGER lists this process's loggers
(``broker/log_levels.py``).

The alter APIs follow ``KafkaApis.handleIncrementalAlterConfigsRequest`` /
``handleAlterConfigsRequest``: first ``ConfigAdminManager.preprocess`` — a resource named twice
is INVALID_REQUEST ("Each resource must appear at most once.") for both entries, a null value
(except for DELETE) is INVALID_REQUEST, a key named twice in one resource is INVALID_REQUEST
"Error due to duplicate config keys", a broker resource must be this broker or empty (the
cluster default, for both APIs), a read-only broker key is INVALID_REQUEST "Cannot update these
configs dynamically: Set(...)", and a BROKER_LOGGER resource (incremental only) is authorized
(CLUSTER ALTER_CONFIGS, before its node id is checked: ``RuntimeLoggerManager``) and applied
right here, to this broker's loggers. Then ALTER_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED) or the cluster (CLUSTER_AUTHORIZATION_FAILED), checked with the
client's principal as in ``ControllerApis``; then each remaining resource goes to the
controller, which validates (``ConfigurationControlManager``) and writes its ``ConfigRecord``s,
or only validates with ``validate_only``; the remaining resources go in one controller call
(``POST /v1/configs``, one Raft entry) as Kafka forwards the whole request, each resource
succeeding or failing on its own. Every broker then applies the change from its metadata
image (``broker/config_describe.py``'s ``BrokerConfigLayers``, ``broker/topic_configs.py``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pykraft.broker.config_describe import (
    CLIENT_METRICS_CONFIG,
    BrokerConfigLayers,
    ConfigEntry,
    broker_entries,
    topic_entries,
)
from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.config_messages import (
    AlterConfigsRequestData,
    AlterResult,
    ConfigsResult,
    DescribeConfigsRequestData,
    DescribeConfigsResource,
    alter_configs_request,
    alter_configs_response,
    describe_configs_request,
    describe_configs_response,
    incremental_alter_configs_request,
)
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.log_levels import BROKER_LOGGER, alter_log_levels, logger_entries
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.admin import (
    AlterConfigOp,
    AlterConfigsRequest,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    LegacyAlterConfigsRequest,
)
from pykraft.metadata.api.config_batch import MAX_BATCH_RESOURCES
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.metadata.broker_config_defs import non_dynamic_configs, scala_set
from pykraft.metadata.records import ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors

TOPIC, BROKER = ConfigResourceType.TOPIC.value, ConfigResourceType.BROKER.value
CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS.value
_DENIED = "Authorization failed."

Request = TypeVar("Request")


def config_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    def adapt(
        read: Callable[[Any], Request],
        handle: Callable[[BrokerServices, Request, RequestContext | None], Awaitable[Any]],
    ) -> ApiHandler:
        async def call(request: RequestContext, message: Any) -> Any:
            return await handle(services, read(message), request)

        return kafka_python_handler(call)

    return {
        ApiKey.DESCRIBE_CONFIGS: adapt(describe_configs_request, describe_configs),
        ApiKey.ALTER_CONFIGS: adapt(alter_configs_request, alter_configs),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: adapt(incremental_alter_configs_request, alter_configs),
    }


def _allowed(
    services: BrokerServices,
    context: RequestContext | None,
    operation: AclOperation,
    resource_type: int,
    name: str,
) -> bool:
    """The client's principal: the controller sees only the broker's."""
    if context is None:
        return True
    if resource_type == TOPIC:
        return services.authorizer.authorize(context, operation, ResourceType.TOPIC, name)
    return services.authorizer.authorize(context, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _refusal(resource_type: int) -> Errors:
    if resource_type == TOPIC:
        return Errors.TOPIC_AUTHORIZATION_FAILED
    return Errors.CLUSTER_AUTHORIZATION_FAILED


# ------------------------------------------------------------------ DescribeConfigs


async def describe_configs(
    services: BrokerServices,
    request: DescribeConfigsRequestData,
    context: RequestContext | None = None,
) -> Any:
    """DESCRIBE_CONFIGS on each topic (else TOPIC_AUTHORIZATION_FAILED) or on the cluster for
    a broker or logger resource (else CLUSTER_AUTHORIZATION_FAILED),
    ``handleDescribeConfigsRequest``; answered from this broker's image."""
    results = [describe_one(services, resource, context) for resource in request.resources]
    return describe_configs_response(request, results)


def describe_one(
    services: BrokerServices, resource: DescribeConfigsResource, context: RequestContext | None
) -> ConfigsResult:
    kind, name = resource.resource_type, resource.resource_name

    def failed(error: Errors, message: str | None) -> ConfigsResult:
        return ConfigsResult(resource_type=kind, resource_name=name, error=error, message=message)

    if kind not in (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS):
        return failed(Errors.INVALID_REQUEST, f"Unsupported resource type: {kind}")
    # ConfigHelper authorizes every resource before it looks at one: a refused principal
    # learns nothing, not even which broker ids are valid.
    if not _allowed(services, context, AclOperation.DESCRIBE_CONFIGS, kind, name):
        return failed(_refusal(kind), _DENIED)
    image = services.metadata()
    if kind == CLIENT_METRICS:
        if name == "":
            message = "Client metrics subscription name must not be empty"
            return failed(Errors.INVALID_REQUEST, message)
        subscription = image.configs.config(CLIENT_METRICS, name)
        entries = client_metrics_entries(subscription, resource.configuration_keys)
        return ConfigsResult(
            resource_type=kind, resource_name=name, error=Errors.NONE, entries=entries
        )
    layers = BrokerConfigLayers.of(image, services.broker_id, services.static_broker_configs)
    keys = resource.configuration_keys
    if kind == TOPIC:
        if name not in image.topics.by_name:
            return failed(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        overrides = image.configs.config(TOPIC, name)
        entries = topic_entries(overrides, layers, keys)
    else:
        problem = _broker_name_problem(services, name, allow_default=kind == BROKER, noun="Broker")
        if problem is not None:
            return failed(Errors.INVALID_REQUEST, problem)
        if kind == BROKER_LOGGER:
            entries = logger_entries(keys)
        else:
            entries = broker_entries(layers, keys, per_broker=name != "")
    return ConfigsResult(resource_type=kind, resource_name=name, error=Errors.NONE, entries=entries)


def client_metrics_entries(
    subscription: Mapping[str, str], keys: frozenset[str] | None
) -> tuple[ConfigEntry, ...]:
    """``ConfigHelper.describeConfigs`` for CLIENT_METRICS: the subscription's stored keys only,
    source CLIENT_METRICS_CONFIG, no synonyms; a subscription never set has no entries."""
    return tuple(
        ConfigEntry(name=name, value=value, source=CLIENT_METRICS_CONFIG, synonyms=())
        for name, value in sorted(subscription.items())
        if keys is None or name in keys
    )


def _broker_name_problem(
    services: BrokerServices, name: str, *, allow_default: bool, noun: str = "Node"
) -> str | None:
    """Kafka's ``ConfigAdminManager.validateResourceNameIsCurrentNodeId`` (alter) and
    ``ConfigHelper.resourceNameToBrokerId`` (describe, ``noun`` "Broker")."""
    if allow_default and name == "":
        return None
    try:
        broker_id = int(name)
    except ValueError:
        return f"{noun} id must be an integer, but it is: {name}"
    if broker_id != services.broker_id:
        expected = f"{services.broker_id} or empty string" if allow_default else services.broker_id
        return f"Unexpected broker id, expected {expected}, but received {name}"
    return None


# ------------------------------------------------------------------ (Incremental)AlterConfigs


async def alter_configs(
    services: BrokerServices,
    request: AlterConfigsRequestData,
    context: RequestContext | None = None,
) -> Any:
    """Both alter APIs: preprocess, authorize, forward (see the module docstring)."""
    keys = [(r.resource_type, r.resource_name) for r in request.resources]
    duplicates = {key for key, count in Counter(keys).items() if count > 1}
    results: list[AlterResult | None] = []
    forwarded: list[tuple[int, AlterConfigsResource]] = []
    for resource in request.resources:
        answer = _answer_here(services, request, resource, duplicates, context)
        if answer is None:
            forwarded.append((len(results), resource))
        results.append(answer)
    for index, result in await _forward(services, request, [r for _, r in forwarded]):
        results[forwarded[index][0]] = result
    assert all(result is not None for result in results)
    return alter_configs_response(request, [r for r in results if r is not None])


def _answer_here(
    services: BrokerServices,
    request: AlterConfigsRequestData,
    resource: AlterConfigsResource,
    duplicates: set[tuple[int, str]],
    context: RequestContext | None,
) -> AlterResult | None:
    """A resource's answer when the broker gives it (preprocess, authorization, a logger);
    None: it goes to the controller."""
    kind, name = resource.resource_type, resource.resource_name

    def result(error: Errors, message: str | None = None) -> AlterResult:
        return AlterResult(resource_type=kind, resource_name=name, error=error, message=message)

    if (kind, name) in duplicates:
        return result(Errors.INVALID_REQUEST, "Each resource must appear at most once.")
    # RuntimeLoggerManager authorizes a logger resource before it looks at the node id.
    logger = kind == BROKER_LOGGER and not request.replace
    if logger and not _allowed(services, context, AclOperation.ALTER_CONFIGS, kind, name):
        return result(Errors.CLUSTER_AUTHORIZATION_FAILED, _DENIED)
    problem = _preprocess(services, request, resource)
    if problem is not None:
        return result(*problem)
    if kind == BROKER_LOGGER:
        return result(*alter_log_levels(resource.configs, validate_only=request.validate_only))
    if not _allowed(services, context, AclOperation.ALTER_CONFIGS, kind, name):
        return result(_refusal(kind), _DENIED)
    return None


async def _forward(
    services: BrokerServices,
    request: AlterConfigsRequestData,
    resources: list[AlterConfigsResource],
) -> list[tuple[int, AlterResult]]:
    """The resources in one controller call per ``MAX_BATCH_RESOURCES`` (one call for any
    request a client sends in practice), as Kafka forwards the whole request; a call that
    fails as a whole fails each of its resources with its error."""
    answers: list[tuple[int, AlterResult]] = []
    for start in range(0, len(resources), MAX_BATCH_RESOURCES):
        chunk = tuple(resources[start : start + MAX_BATCH_RESOURCES])
        batch: AlterConfigsRequest = (
            LegacyAlterConfigsRequest(chunk, request.validate_only)
            if request.replace
            else IncrementalAlterConfigsRequest(chunk, request.validate_only)
        )
        failed: list[tuple[Errors, str | None]]
        try:
            response = await services.controller.alter_configs_batch(batch)
        except ControllerError as error:
            failed = [(error.code, error.message)] * len(chunk)
        else:
            assert len(response.results) == len(chunk), "a result per resource, in order"
            failed = [(r.error.error, r.error.message) for r in response.results]
        for offset, (resource, (code, message)) in enumerate(zip(chunk, failed, strict=True)):
            answers.append(
                (
                    start + offset,
                    AlterResult(
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        error=code,
                        message=None if code is Errors.NONE else message,
                    ),
                )
            )
    return answers


def _preprocess(
    services: BrokerServices, request: AlterConfigsRequestData, resource: AlterConfigsResource
) -> tuple[Errors, str] | None:
    """Kafka's ``ConfigAdminManager.preprocess`` for one resource (duplicates aside)."""
    kind, name = resource.resource_type, resource.resource_name
    known_kinds = (
        (TOPIC, BROKER, CLIENT_METRICS)
        if request.replace
        else (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS)
    )
    if kind not in known_kinds:
        return Errors.INVALID_REQUEST, f"Unknown resource type {kind}"
    unknown_ops = [c.op for c in resource.configs if not isinstance(c.op, AlterConfigOp)]
    if unknown_ops:
        return Errors.INVALID_REQUEST, f"Unknown operations type {unknown_ops[0]}"
    configs = resource.configs
    nulls = [c.name for c in configs if c.op is not AlterConfigOp.DELETE and c.value is None]
    if nulls:
        return Errors.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
    if len({c.name for c in configs}) != len(configs):
        # Otherwise the later entry would silently win (or a DELETE undo a SET).
        return Errors.INVALID_REQUEST, "Error due to duplicate config keys"
    if kind == CLIENT_METRICS and name == "":
        # ClientMetricsConfigs.validate, said here: an empty name has no controller path.
        return Errors.INVALID_REQUEST, "Subscription name can't be empty"
    if kind in (TOPIC, CLIENT_METRICS):
        return None
    # Both APIs accept the cluster default ("") for a broker resource: the legacy
    # preprocess checks the node id only when the name is non-empty.
    problem = _broker_name_problem(services, name, allow_default=kind == BROKER)
    if problem is not None:
        return Errors.INVALID_REQUEST, problem
    if kind == BROKER:
        # DynamicBrokerConfig.validateConfigs: a key Kafka knows that is not changed live.
        changed = [c.name for c in resource.configs if c.op is not AlterConfigOp.DELETE]
        static = non_dynamic_configs(changed)
        if static:
            return (
                Errors.INVALID_REQUEST,
                "Cannot update these configs dynamically: " + scala_set(static),
            )
    return None
