"""KIP-853's AddRaftVoter and RemoveRaftVoter over the controller's HTTP API.

POST /v1/quorum/voters/add (the active controller; a standby redirects with 421 NOT_CONTROLLER)
  {"cluster_id": str|null, "timeout_ms": int, "voter_id": int, "voter_directory_id": str,
   "listeners": [{"name", "host", "port"}]}                       -> 200 {}
POST /v1/quorum/voters/remove
  {"cluster_id": str|null, "voter_id": int, "voter_directory_id": str}   -> 200 {}

The fields are Kafka's ``AddRaftVoterRequest`` / ``RemoveRaftVoterRequest`` (v0) by their
snake_case names; directory ids are Kafka uuids in their text form. A refusal is the usual error
body with Kafka's code (``quorum/voter_changes.py`` lists them). The listeners of a new voter
name its Raft (pysyncobj) address ``RAFT`` and its HTTP listener ``CONTROLLER``.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.records import kafka_string_to_uuid

# Bounds (STYLE.md §7): Kafka's request has one listener per name.
MAX_VOTER_LISTENERS = 16
MAX_TIMEOUT_MS = 10 * 60 * 1000


@attrs.frozen(kw_only=True)
class VoterListener:
    name: str
    host: str
    port: int


@attrs.frozen(kw_only=True)
class AddVoterRequest:
    cluster_id: str | None
    timeout_ms: int
    voter_id: int
    voter_directory_id: str
    listeners: tuple[VoterListener, ...]


@attrs.frozen(kw_only=True)
class RemoveVoterRequest:
    cluster_id: str | None
    voter_id: int
    voter_directory_id: str


def add_voter_to_json(request: AddVoterRequest) -> JsonObject:
    return {
        "cluster_id": request.cluster_id,
        "timeout_ms": request.timeout_ms,
        "voter_id": request.voter_id,
        "voter_directory_id": request.voter_directory_id,
        "listeners": [
            {"name": item.name, "host": item.host, "port": item.port} for item in request.listeners
        ],
    }


def add_voter_from_json(fields: Fields) -> AddVoterRequest:
    listeners = fields.array("listeners")
    if len(listeners) > MAX_VOTER_LISTENERS:
        raise JsonBodyError(f"listeners: at most {MAX_VOTER_LISTENERS}")
    timeout_ms = fields.integer("timeout_ms")
    if not 0 <= timeout_ms <= MAX_TIMEOUT_MS:
        raise JsonBodyError(f"timeout_ms must be between 0 and {MAX_TIMEOUT_MS}")
    parsed = []
    for index, item in enumerate(listeners):
        listener = Fields.of(item, f"listeners[{index}]")
        parsed.append(
            VoterListener(
                name=listener.string("name"),
                host=listener.string("host"),
                port=listener.integer("port"),
            )
        )
    return AddVoterRequest(
        cluster_id=fields.optional_string("cluster_id"),
        timeout_ms=timeout_ms,
        voter_id=fields.integer("voter_id"),
        voter_directory_id=_directory_id(fields),
        listeners=tuple(parsed),
    )


def _directory_id(fields: Fields) -> str:
    text = fields.string("voter_directory_id")
    try:
        kafka_string_to_uuid(text)
    except ValueError as error:
        raise JsonBodyError(f"voter_directory_id: {error}") from None
    return text


def remove_voter_to_json(request: RemoveVoterRequest) -> JsonObject:
    return {
        "cluster_id": request.cluster_id,
        "voter_id": request.voter_id,
        "voter_directory_id": request.voter_directory_id,
    }


def remove_voter_from_json(fields: Fields) -> RemoveVoterRequest:
    return RemoveVoterRequest(
        cluster_id=fields.optional_string("cluster_id"),
        voter_id=fields.integer("voter_id"),
        voter_directory_id=_directory_id(fields),
    )
