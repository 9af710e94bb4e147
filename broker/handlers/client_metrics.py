"""ListClientMetricsResources (API 74 v0, KIP-714): the names of the CLIENT_METRICS subscriptions.

Kafka 3.9's ``KafkaApis.handleListClientMetricsResources``: DESCRIBE_CONFIGS on the cluster,
else the whole answer is CLUSTER_AUTHORIZATION_FAILED with no resources; otherwise every
subscription ``ClientMetricsManager`` knows, which are the CLIENT_METRICS resources with configs
in the metadata image (a subscription whose keys are all deleted is gone). Served from this
broker's image. Kafka 4.1 renamed the API ListConfigResources (KIP-1142, v1 adds resource types);
v0 is this one, and kafka-python's v0 class codes the same bytes.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import AclOperation
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ConfigResourceType
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Response = response_class(ApiKey.LIST_CONFIG_RESOURCES)
CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS.value


def client_metrics_subscriptions(image: MetadataImage) -> list[str]:
    """The CLIENT_METRICS resources with at least one config, by name."""
    return sorted(name for kind, name in image.configs.resources if kind == CLIENT_METRICS)


def list_client_metrics_resources(
    services: BrokerServices, context: RequestContext, version: int
) -> Any:
    if not services.authorizer.authorize_cluster(context, AclOperation.DESCRIBE_CONFIGS):
        return _Response(
            version=version,
            throttle_time_ms=0,
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED.code,
            config_resources=[],
        )
    names = client_metrics_subscriptions(services.metadata())
    return _Response(
        version=version,
        throttle_time_ms=0,
        error_code=Errors.NONE.code,
        config_resources=[
            _Response.ConfigResource(resource_name=name, resource_type=CLIENT_METRICS)
            for name in names
        ],
    )


def list_client_metrics_resources_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, message: Any) -> Any:
        return list_client_metrics_resources(services, context, message.version)

    return kafka_python_handler(handle)
