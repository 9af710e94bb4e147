"""DescribeCluster (v0-v1), served from the local image as a Kafka broker does from its
metadata cache: the unfenced brokers on the request's listener, the cluster id, and the
controller id of ``services.controller_id``. Asking a broker for controller endpoints
(endpoint_type 2) is UNSUPPORTED_ENDPOINT_TYPE. KIP-430: the cluster's authorized operations
when asked, none without DESCRIBE on the cluster (``KafkaApis.handleDescribeCluster``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pykraft.broker.handlers.admin_requests import BROKER_ENDPOINT_TYPE, DescribeClusterRequestData
from pykraft.broker.handlers.admin_responses import (
    ClusterBroker,
    DescribeClusterResult,
    describe_cluster_response,
)
from pykraft.broker.handlers.services import BrokerServices, alive_brokers, controller_id
from pykraft.broker.network import RequestContext
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclOperation, ResourceType
from pykraft.protocol.errors import Errors


def cluster_operations(services: BrokerServices, context: RequestContext) -> set[int]:
    """KIP-430 for the cluster: none without DESCRIBE on it (``handleDescribeCluster``)."""
    if not services.authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
        return set()
    return services.authorizer.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME)


# ------------------------------------------------------------------ DescribeCluster


def describe_cluster(
    services: BrokerServices, request: DescribeClusterRequestData, listener_name: str
) -> Any:
    return describe_cluster_response(
        request.version, cluster_result(services, request, listener_name)
    )


def cluster_result(
    services: BrokerServices, request: DescribeClusterRequestData, listener_name: str
) -> DescribeClusterResult:
    endpoint_type = request.endpoint_type
    if endpoint_type != BROKER_ENDPOINT_TYPE:
        return DescribeClusterResult(
            error=Errors.UNSUPPORTED_ENDPOINT_TYPE,
            message="The request was sent to an endpoint of type BROKER, but we wanted "
            f"an endpoint of type {_endpoint_type_name(endpoint_type)}",
            endpoint_type=endpoint_type,
            cluster_id=services.cluster_id,
            controller_id=-1,
        )
    alive = alive_brokers(services.metadata(), listener_name)
    return DescribeClusterResult(
        error=Errors.NONE,
        message=None,
        endpoint_type=BROKER_ENDPOINT_TYPE,
        cluster_id=services.cluster_id,
        controller_id=controller_id(services.broker_id, alive),
        brokers=tuple(
            ClusterBroker(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack) for n in alive
        ),
    )


def _endpoint_type_name(endpoint_type: int) -> str:
    names: Mapping[int, str] = {1: "BROKER", 2: "CONTROLLER"}
    return names.get(endpoint_type, f"UNKNOWN({endpoint_type})")
