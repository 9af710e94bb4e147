"""Cluster, broker, config and election routes of the controller's HTTP API.

The write requests are the pure controller's inputs (Kafka's IncrementalAlterConfigs and
ElectLeaders; ``quorum.controller`` re-exports them); reads are answered by any controller from
its committed image. Errors: ``errors.py``.

GET  /v1/cluster  -> {"controller_id", "controllers": [{node_id, url}], "metadata_offset",
                      "metadata_epoch", "brokers": n, "topics": n, "partitions": n,
                      "features": {...}}
GET  /v1/brokers  -> {"brokers": [{broker_id, broker_epoch, incarnation_id, endpoints, rack,
                      fenced, in_controlled_shutdown}]}
POST /v1/elections {"election_type": "preferred" | "unclean",
                    "partitions": [{"topic": "pets", "partitions": [0, 1]}] | null}
                  -> {"results": [{topic, partitions: [{partition, error, message}]}]}
GET  /v1/configs/{topic|broker}/{name} -> {resource_type, resource_name, configs}
                  (the cluster-wide default broker resource, name "", is "<default>")
PUT  /v1/configs/{topic|broker}/{name} {"set": {"k": "v"}, "delete": ["k2"],
                    "append": {"k3": "a,b"}, "subtract": {"k3": "c"},
                    "replace": false, "validate_only": false} -> same as GET, after the change
                  ("replace": true is Kafka's AlterConfigs: "set" becomes the whole set)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

import attrs

from pykraft.metadata.api.brokers import endpoint_from_json, endpoint_to_json
from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject, one_of
from pykraft.metadata.records import BrokerEndpoint, ConfigResourceType

# ---------------------------------------------------------------------------- cluster, brokers


@attrs.frozen(kw_only=True)
class ControllerAddress:
    node_id: int
    # None when this controller does not know the other's HTTP listener.
    url: str | None


@attrs.frozen(kw_only=True)
class ClusterDescription:
    controller_id: int | None
    controllers: tuple[ControllerAddress, ...]
    metadata_offset: int
    metadata_epoch: int
    brokers: int
    topics: int
    partitions: int
    features: Mapping[str, int] = attrs.field(factory=dict)


def cluster_to_json(cluster: ClusterDescription) -> JsonObject:
    return {
        "controller_id": cluster.controller_id,
        "controllers": [{"node_id": c.node_id, "url": c.url} for c in cluster.controllers],
        "metadata_offset": cluster.metadata_offset,
        "metadata_epoch": cluster.metadata_epoch,
        "brokers": cluster.brokers,
        "topics": cluster.topics,
        "partitions": cluster.partitions,
        "features": dict(cluster.features),
    }


def cluster_from_json(fields: Fields) -> ClusterDescription:
    features = fields.json_object("features", {})
    if not all(type(level) is int for level in features.values()):
        raise JsonBodyError("The values of 'features' must be integers.")
    return ClusterDescription(
        controller_id=fields.optional_integer("controller_id"),
        controllers=tuple(
            ControllerAddress(node_id=c.integer("node_id"), url=c.optional_string("url"))
            for c in fields.objects("controllers")
        ),
        metadata_offset=fields.integer("metadata_offset"),
        metadata_epoch=fields.integer("metadata_epoch"),
        brokers=fields.integer("brokers"),
        topics=fields.integer("topics"),
        partitions=fields.integer("partitions"),
        features=dict(features),
    )


@attrs.frozen(kw_only=True)
class BrokerDescription:
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool


def brokers_to_json(brokers: tuple[BrokerDescription, ...]) -> JsonObject:
    return {
        "brokers": [
            {
                "broker_id": b.broker_id,
                "broker_epoch": b.broker_epoch,
                "incarnation_id": b.incarnation_id,
                "endpoints": [endpoint_to_json(e) for e in b.endpoints],
                "rack": b.rack,
                "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
            }
            for b in brokers
        ]
    }


def brokers_from_json(fields: Fields) -> tuple[BrokerDescription, ...]:
    return tuple(
        BrokerDescription(
            broker_id=b.integer("broker_id"),
            broker_epoch=b.integer("broker_epoch"),
            incarnation_id=b.string("incarnation_id"),
            endpoints=tuple(endpoint_from_json(e) for e in b.objects("endpoints")),
            rack=b.optional_string("rack"),
            fenced=b.boolean("fenced"),
            in_controlled_shutdown=b.boolean("in_controlled_shutdown"),
        )
        for b in fields.objects("brokers")
    )


# ---------------------------------------------------------------------------- elections


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType`` ids."""

    PREFERRED = 0
    UNCLEAN = 1


@attrs.frozen
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@attrs.frozen
class ElectLeadersRequest:
    election_type: int
    # None: every partition of every topic (then partitions needing no election are omitted).
    topic_partitions: tuple[TopicPartitions, ...] | None = None


@attrs.frozen
class PartitionResult:
    partition_id: int
    error: ApiError


@attrs.frozen
class ReplicaElectionResult:
    topic: str
    partition_results: tuple[PartitionResult, ...]


@attrs.frozen
class ElectLeadersResponse:
    error: ApiError = SUCCESS
    results: tuple[ReplicaElectionResult, ...] = ()


_ELECTION_NAMES = tuple(kind.name.lower() for kind in ElectionType)


def elect_leaders_request_to_json(request: ElectLeadersRequest) -> JsonObject:
    return {
        "election_type": ElectionType(request.election_type).name.lower(),
        "partitions": None
        if request.topic_partitions is None
        else [
            {"topic": t.topic, "partitions": list(t.partitions)} for t in request.topic_partitions
        ],
    }


def elect_leaders_request_from_json(fields: Fields) -> ElectLeadersRequest:
    kind = one_of(
        fields.string("election_type", "preferred").lower(), _ELECTION_NAMES, "election_type"
    )
    raw = fields.optional_array("partitions")
    partitions = (
        None
        if raw is None
        else tuple(
            TopicPartitions(topic=item.string("topic"), partitions=item.integers("partitions"))
            for item in (Fields.of(value, "an item of 'partitions'") for value in raw)
        )
    )
    return ElectLeadersRequest(
        election_type=ElectionType[kind.upper()].value, topic_partitions=partitions
    )


def elect_leaders_response_to_json(response: ElectLeadersResponse) -> JsonObject:
    assert response.error.is_success(), "a refused election is answered with the error body"
    return {
        "results": [
            {
                "topic": r.topic,
                "partitions": [
                    {"partition": p.partition_id, **error_field_to_json(p.error)}
                    for p in r.partition_results
                ],
            }
            for r in response.results
        ]
    }


def elect_leaders_response_from_json(fields: Fields) -> ElectLeadersResponse:
    return ElectLeadersResponse(
        results=tuple(
            ReplicaElectionResult(
                topic=r.string("topic"),
                partition_results=tuple(
                    PartitionResult(
                        partition_id=p.integer("partition"), error=error_field_from_json(p)
                    )
                    for p in r.objects("partitions")
                ),
            )
            for r in fields.objects("results")
        )
    )


# ---------------------------------------------------------------------------- configs


class AlterConfigOp(enum.IntEnum):
    """Kafka's ``AlterConfigOp.OpType`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@attrs.frozen
class AlterableConfig:
    name: str
    op: AlterConfigOp
    value: str | None = None


@attrs.frozen
class AlterConfigsResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]


@attrs.frozen
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@attrs.frozen
class LegacyAlterConfigsRequest:
    """Kafka's AlterConfigs: each resource's configs (all SET) replace its whole set."""

    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@attrs.frozen
class AlterConfigsResourceResult:
    resource_type: int
    resource_name: str
    error: ApiError


@attrs.frozen
class IncrementalAlterConfigsResponse:
    results: tuple[AlterConfigsResourceResult, ...]


# The path's ``{resource_type}``: Kafka's ConfigResource.Type, lower case.
_RESOURCE_TYPES = {
    "topic": ConfigResourceType.TOPIC,
    "broker": ConfigResourceType.BROKER,
    "client_metrics": ConfigResourceType.CLIENT_METRICS,
}


# The cluster-wide default broker resource's name is empty, which a path cannot carry; the path
# names it as Kafka's ConfigEntityName.DEFAULT does.
DEFAULT_RESOURCE_PATH_NAME = "<default>"


def config_name_to_path(resource_type: int, name: str) -> str:
    """A resource name as the path's ``{resource_name}``."""
    if resource_type == ConfigResourceType.BROKER and name == "":
        return DEFAULT_RESOURCE_PATH_NAME
    return name


def config_name_from_path(resource_type: ConfigResourceType, segment: str) -> str:
    if resource_type is ConfigResourceType.BROKER and segment == DEFAULT_RESOURCE_PATH_NAME:
        return ""
    return segment


def config_resource_from_path(resource_type: str) -> ConfigResourceType:
    kind = resource_type.lower()
    if kind not in _RESOURCE_TYPES:
        raise JsonBodyError("The resource type is 'topic', 'broker' or 'client_metrics'.")
    return _RESOURCE_TYPES[kind]


AlterConfigsRequest = IncrementalAlterConfigsRequest | LegacyAlterConfigsRequest
# The body's op fields: a map of values (or a list of names for DELETE) per op.
_OP_FIELDS = (
    ("set", AlterConfigOp.SET),
    ("append", AlterConfigOp.APPEND),
    ("subtract", AlterConfigOp.SUBTRACT),
)


def alter_configs_request_to_json(request: AlterConfigsRequest) -> JsonObject:
    """The body; the resource is the path's ``{resource_type}/{resource_name}``. Over HTTP a
    request alters one resource: incrementally (SET, DELETE, APPEND, SUBTRACT), or, with
    ``"replace": true`` (Kafka's AlterConfigs), by replacing its whole set with ``set``."""
    (resource,) = request.resources
    body: JsonObject = {
        field: {c.name: c.value for c in resource.configs if c.op is op} for field, op in _OP_FIELDS
    }
    body["delete"] = [c.name for c in resource.configs if c.op is AlterConfigOp.DELETE]
    body["validate_only"] = request.validate_only
    if isinstance(request, LegacyAlterConfigsRequest):
        body["replace"] = True
    return body


def alter_configs_request_from_json(
    resource_type: ConfigResourceType, resource_name: str, fields: Fields
) -> AlterConfigsRequest:
    changes = [
        AlterableConfig(name, op, value)
        for field, op in _OP_FIELDS
        for name, value in fields.nullable_string_map(field, {}).items()
    ]
    changes += [
        AlterableConfig(name, AlterConfigOp.DELETE) for name in fields.strings("delete", [])
    ]
    resources = (AlterConfigsResource(resource_type.value, resource_name, tuple(changes)),)
    validate_only = fields.boolean("validate_only", False)
    if fields.boolean("replace", False):
        if any(c.op is not AlterConfigOp.SET for c in changes):
            raise JsonBodyError("A replace request names its configs in 'set' only.")
        return LegacyAlterConfigsRequest(resources=resources, validate_only=validate_only)
    return IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only)


@attrs.frozen(kw_only=True)
class ConfigsDescription:
    """A resource's configs, each with its effective value."""

    resource_type: str
    resource_name: str
    configs: Mapping[str, str]


def configs_to_json(description: ConfigsDescription) -> JsonObject:
    return {
        "resource_type": description.resource_type,
        "resource_name": description.resource_name,
        "configs": dict(description.configs),
    }


def configs_from_json(fields: Fields) -> ConfigsDescription:
    return ConfigsDescription(
        resource_type=fields.string("resource_type"),
        resource_name=fields.string("resource_name"),
        configs=fields.string_map("configs"),
    )


# ---------------------------------------------------------------------------- quorum status


@attrs.frozen(kw_only=True)
class VoterStatus:
    node_id: int
    raft_address: str
    url: str | None
    # None where this controller cannot know (a follower's view of the others).
    connected: bool | None
    match_index: int | None
    # Raft entries behind the leader's commit index (only the leader knows).
    lag: int | None


@attrs.frozen(kw_only=True)
class RaftStatus:
    commit_index: int | None
    last_applied: int | None
    log_entries: int | None
    has_quorum: bool | None


@attrs.frozen(kw_only=True)
class QuorumDescription:
    """``GET /v1/quorum``: this controller's view of the Raft quorum."""

    node_id: int
    state: str
    leader_id: int | None
    leader_url: str | None
    raft_term: int | None
    committed_offset: int
    applied_offset: int
    log_start_offset: int
    raft: RaftStatus
    voters: tuple[VoterStatus, ...]


def quorum_to_json(quorum: QuorumDescription) -> JsonObject:
    return {
        "node_id": quorum.node_id,
        "state": quorum.state,
        "leader_id": quorum.leader_id,
        "leader_url": quorum.leader_url,
        "raft_term": quorum.raft_term,
        "committed_offset": quorum.committed_offset,
        "applied_offset": quorum.applied_offset,
        "log_start_offset": quorum.log_start_offset,
        "raft": {
            "commit_index": quorum.raft.commit_index,
            "last_applied": quorum.raft.last_applied,
            "log_entries": quorum.raft.log_entries,
            "has_quorum": quorum.raft.has_quorum,
        },
        "voters": [
            {
                "node_id": v.node_id,
                "raft_address": v.raft_address,
                "url": v.url,
                "connected": v.connected,
                "match_index": v.match_index,
                "lag": v.lag,
            }
            for v in quorum.voters
        ],
    }


def quorum_from_json(fields: Fields) -> QuorumDescription:
    raft = Fields.of(fields.json_object("raft"), "the field 'raft'")
    return QuorumDescription(
        node_id=fields.integer("node_id"),
        state=fields.string("state"),
        leader_id=fields.optional_integer("leader_id"),
        leader_url=fields.optional_string("leader_url"),
        raft_term=fields.optional_integer("raft_term"),
        committed_offset=fields.integer("committed_offset"),
        applied_offset=fields.integer("applied_offset"),
        log_start_offset=fields.integer("log_start_offset"),
        raft=RaftStatus(
            commit_index=raft.optional_integer("commit_index"),
            last_applied=raft.optional_integer("last_applied"),
            log_entries=raft.optional_integer("log_entries"),
            has_quorum=raft.optional_boolean("has_quorum"),
        ),
        voters=tuple(
            VoterStatus(
                node_id=v.integer("node_id"),
                raft_address=v.string("raft_address"),
                url=v.optional_string("url"),
                connected=v.optional_boolean("connected"),
                match_index=v.optional_integer("match_index"),
                lag=v.optional_integer("lag"),
            )
            for v in fields.objects("voters")
        ),
    )
