"""The OpenAPI 3 document of the controller's HTTP API, served at /v1/openapi.json.

Kept next to the routes it describes (quorum/service*.py); tests check every route is listed.
"""

from __future__ import annotations

from typing import Any

from pykraft.metadata.api.json_fields import MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES
from pykraft.metadata.api.security import ACL_FIELDS

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "Kafka-style error name, e.g. NOT_CONTROLLER"},
        "message": {"type": "string", "description": "A human sentence"},
        "leader": {
            "type": ["string", "null"],
            "description": "NOT_CONTROLLER only: the active controller's base URL",
        },
    },
}


def _object(properties: dict[str, str], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {name: {"type": kind} for name, kind in properties.items()},
    }


def _op(
    summary: str,
    body: dict[str, Any] | None = None,
    write: bool = False,
    parameters: list[dict[str, Any]] | None = None,
    extra_errors: dict[str, str] | None = None,
) -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    responses: dict[str, Any] = {
        "200": {
            "description": "OK",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        "400": {"description": "INVALID_REQUEST: bad JSON or an invalid field", "content": error},
    }
    if write:
        responses["421"] = {
            "description": "NOT_CONTROLLER: retry at the URL in `leader`",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
        responses["503"] = {"description": "NOT_CONTROLLER (no leader) or REQUEST_TIMED_OUT"}
    for status, description in (extra_errors or {}).items():
        responses[status] = {"description": description}
    operation: dict[str, Any] = {"summary": summary, "responses": responses}
    if body is not None:
        responses["400"]["description"] = (
            f"INVALID_REQUEST: not one UTF-8 JSON object nested at most {MAX_JSON_DEPTH} deep, "
            "or an invalid field"
        )
        responses["413"] = {
            "description": f"REQUEST_TOO_LARGE: a body over {MAX_REQUEST_BODY_BYTES} bytes",
            "content": error,
        }
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": body}},
        }
    if parameters:
        operation["parameters"] = parameters
    return operation


def _query(name: str, description: str, required: bool = False) -> dict[str, Any]:
    field = {"name": name, "in": "query", "required": required, "description": description}
    return field | {"schema": {"type": "integer"}}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


ENDPOINT = _object(
    {"name": "string", "host": "string", "port": "integer", "security_protocol": "string"}
)


def _voter_op(summary: str, more: dict[str, str]) -> dict[str, Any]:
    """AddRaftVoter / RemoveRaftVoter (``metadata/api/voters.py``)."""
    fields = {"cluster_id": "string", "voter_id": "integer", "voter_directory_id": "string"}
    body = _object(fields | more, ("voter_id", "voter_directory_id", *more))
    return {"post": _op(summary, body, write=True)}


def _paths() -> dict[str, Any]:
    return {
        "/v1/brokers/register": {
            "post": _op(
                "Register a broker incarnation (KIP-631); answers its broker_epoch",
                _object(
                    {
                        "broker_id": "integer",
                        "incarnation_id": "string",
                        "endpoints": "array",
                        "rack": "string",
                    },
                    ("broker_id", "incarnation_id", "endpoints"),
                ),
                write=True,
            )
        },
        "/v1/brokers/heartbeat": {
            "post": _op(
                "Broker heartbeat with its metadata offset; answers fenced/shutdown state",
                _object(
                    {
                        "broker_id": "integer",
                        "broker_epoch": "integer",
                        "current_metadata_offset": "integer",
                        "want_fence": "boolean",
                        "want_shut_down": "boolean",
                        "offline_log_dirs": "array",
                        "offline_replicas": "array",
                        "broker_topic_metrics": "object",
                    },
                    ("broker_id", "broker_epoch"),
                ),
                write=True,
            )
        },
        "/v1/metadata/records": {
            "get": _op(
                "Long-poll committed metadata batches from an offset",
                parameters=[
                    _query("from", "first offset wanted", True),
                    _query("max_wait_ms", "wait up to this long for new records"),
                    _query("max_records", "about this many records at most"),
                    _query("broker_id", "a registered broker (a standby names the leader)"),
                    _query("broker_epoch", "that broker's epoch"),
                ],
                extra_errors={
                    "409": "SNAPSHOT_REQUIRED: load `snapshot`, continue at its end_offset"
                },
            )
        },
        "/v1/metadata/snapshots": {"get": _op("List this controller's snapshots")},
        "/v1/metadata/snapshots/{snapshot_id}": {
            "get": {
                **_op(
                    "Download a snapshot (JSON lines, metadata/snapshot.py format)",
                    extra_errors={"404": "SNAPSHOT_NOT_FOUND"},
                ),
                "parameters": [_path("snapshot_id")],
            }
        },
        "/v1/alter-partition": {
            "post": _op(
                "A partition leader proposes a new ISR (Kafka AlterPartition)",
                _object(
                    {"broker_id": "integer", "broker_epoch": "integer", "topics": "array"},
                    ("broker_id", "broker_epoch", "topics"),
                ),
                write=True,
            )
        },
        "/v1/producer-ids": {
            "post": _op(
                "Allocate a block of producer ids (KIP-730)",
                _object(
                    {"broker_id": "integer", "broker_epoch": "integer"},
                    ("broker_id", "broker_epoch"),
                ),
                write=True,
            )
        },
        "/v1/cluster": {"get": _op("Cluster summary: controllers, brokers, counts")},
        "/v1/quorum": {"get": _op("Raft quorum: voters, leader, term, offsets, lag")},
        "/v1/quorum/describe": {
            "get": _op(
                "Kafka's DescribeQuorum from the active controller: leader, epoch, high "
                "watermark, voters and observers (421 NOT_CONTROLLER from a standby)"
            )
        },
        "/v1/quorum/voters/add": _voter_op(
            "KIP-853 AddRaftVoter: add a caught-up observer controller to the voters",
            {"timeout_ms": "integer", "listeners": "array"},
        ),
        "/v1/quorum/voters/remove": _voter_op("KIP-853 RemoveRaftVoter: remove a voter", {}),
        "/v1/topics": {
            "get": _op("List topics"),
            "post": _op(
                "Create a topic",
                _object(
                    {
                        "name": "string",
                        "partitions": "integer",
                        "replication_factor": "integer",
                        "assignments": "object",
                        "configs": "object",
                        "validate_only": "boolean",
                    },
                    ("name",),
                ),
                write=True,
                extra_errors={"409": "TOPIC_ALREADY_EXISTS"},
            ),
        },
        "/v1/topics/{name}": {
            "get": {
                **_op("Describe a topic", extra_errors={"404": "UNKNOWN_TOPIC_OR_PARTITION"}),
                "parameters": [_path("name")],
            },
            "delete": {
                **_op(
                    "Delete a topic", write=True, extra_errors={"404": "UNKNOWN_TOPIC_OR_PARTITION"}
                ),
                "parameters": [_path("name")],
            },
        },
        "/v1/topics/{name}/partitions": {
            "post": {
                **_op(
                    "Add partitions to a topic (CreatePartitions)",
                    _object({"count": "integer", "assignments": "array"}, ("count",)),
                    write=True,
                ),
                "parameters": [_path("name")],
            }
        },
        "/v1/elections": {
            "post": _op(
                "Elect leaders (preferred or unclean) for partitions",
                _object({"election_type": "string", "partitions": "array"}),
                write=True,
            )
        },
        "/v1/features": {
            "post": _op(
                "Kafka's UpdateFeatures: finalize feature levels (upgrade, safe or unsafe "
                "downgrade), one result per feature",
                _object({"feature_updates": "array", "validate_only": "boolean"}),
                write=True,
            )
        },
        "/v1/reassignments": {
            "post": _op(
                "Start or cancel partition reassignments (AlterPartitionReassignments, KIP-455)",
                _object({"partitions": "array"}, ("partitions",)),
                write=True,
            ),
            "get": _op("List partition reassignments in progress (ListPartitionReassignments)"),
        },
        "/v1/brokers": {"get": _op("List registered brokers")},
        "/v1/brokers/{broker_id}": {
            "delete": {
                **_op(
                    "Unregister a broker (Kafka UnregisterBroker)",
                    write=True,
                    extra_errors={"404": "BROKER_ID_NOT_REGISTERED"},
                ),
                "parameters": [_path("broker_id")],
            }
        },
        "/v1/configs/{resource_type}/{resource_name}": {
            "get": {
                **_op("Describe configs of a topic or broker"),
                "parameters": [_path("resource_type"), _path("resource_name")],
            },
            "put": {
                **_op(
                    "Incrementally alter configs (set / delete)",
                    _object({"set": "object", "delete": "array", "validate_only": "boolean"}),
                    write=True,
                ),
                "parameters": [_path("resource_type"), _path("resource_name")],
            },
        },
        "/v1/configs": {
            "post": _op(
                "Alter every resource of one AlterConfigs / IncrementalAlterConfigs request",
                _object({"resources": "array", "validate_only": "boolean", "replace": "boolean"}),
                write=True,
            )
        },
        "/v1/openapi.json": {"get": _op("This document")},
        "/metrics": {"get": _op("Prometheus text in Kafka's metric names (quorum/metrics.py)")},
        **_security_paths(),
    }


def _text_query(name: str, description: str) -> dict[str, Any]:
    return {**_query(name, description), "schema": {"type": "string"}}


def _security_paths() -> dict[str, Any]:
    """ACLs and SCRAM credentials (metadata/api/security.py documents the payloads)."""
    filter_parameters = [
        _text_query(name, f"Only ACLs with this {name} (Kafka's names; absent = ANY)")
        for name in ACL_FIELDS
    ]
    return {
        "/v1/acls": {
            "post": _op(
                "Create ACLs (Kafka CreateAcls); one result per creation",
                _object({"creations": "array"}, ("creations",)),
                write=True,
            ),
            "get": _op(
                "Describe ACLs matching a filter (Kafka DescribeAcls)",
                parameters=filter_parameters,
            ),
            "delete": _op(
                "Delete the ACLs matching each filter (Kafka DeleteAcls)",
                _object({"filters": "array"}, ("filters",)),
                write=True,
            ),
        },
        "/v1/scram-credentials": {
            "post": _op(
                "Alter SCRAM credentials: deletions and upsertions with the salted password "
                "(Kafka AlterUserScramCredentials, KIP-554); one result per user",
                _object({"deletions": "array", "upsertions": "array"}),
                write=True,
            ),
            "get": _op(
                "Describe SCRAM credentials: mechanism and iterations only",
                parameters=[_text_query("user", "A user to describe; repeat for more")],
            ),
        },
        "/v1/client-quotas": {
            "post": _op(
                "Alter client quotas (Kafka AlterClientQuotas, KIP-546); one result per entity",
                _object({"entries": "array", "validate_only": "boolean"}, ("entries",)),
                write=True,
            ),
        },
        "/v1/client-quotas/describe": {
            "post": _op(
                "Describe the client quotas a filter matches (Kafka DescribeClientQuotas)",
                _object({"components": "array", "strict": "boolean"}),
            ),
        },
        "/v1/delegation-tokens": {
            "post": _op(
                "Create a delegation token for a requester (Kafka CreateDelegationToken, "
                "KIP-48); brokers only",
                _object(
                    {
                        "requester": "string",
                        "owner": "string",
                        "renewers": "array",
                        "max_lifetime_ms": "integer",
                    },
                    ("requester",),
                ),
                write=True,
            ),
        },
        "/v1/delegation-tokens/renew": {
            "post": _op(
                "Renew the delegation token with this HMAC (Kafka RenewDelegationToken)",
                _object(
                    {"principal": "string", "hmac": "string", "renew_period_ms": "integer"},
                    ("principal", "hmac", "renew_period_ms"),
                ),
                write=True,
            ),
        },
        "/v1/delegation-tokens/expire": {
            "post": _op(
                "Expire the delegation token with this HMAC (Kafka ExpireDelegationToken)",
                _object(
                    {"principal": "string", "hmac": "string", "expiry_time_period_ms": "integer"},
                    ("principal", "hmac", "expiry_time_period_ms"),
                ),
                write=True,
            ),
        },
    }


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pykraft controller API",
            "version": "1",
            "description": "Admin and broker RPCs of a pykraft controller. Writes must reach the "
            "active controller; others answer NOT_CONTROLLER with its URL.",
        },
        "paths": _paths(),
        "components": {"schemas": {"Error": ERROR_SCHEMA, "Endpoint": ENDPOINT}},
    }
