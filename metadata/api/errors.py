"""How the controller's HTTP API fails: ``ApiError``, the error body, statuses, the redirect.

``ApiError`` is the value the controller answers with — a Kafka error code and a sentence. The
codes are ``protocol.errors.Errors`` (Kafka's ``org.apache.kafka.common.protocol.Errors``), so a
response can be copied onto the Kafka wire or into the error body unchanged; Kafka's default
messages are listed for the errors the controller produces.

Every failed request is answered ``ErrorBody``: ``{"error": <Kafka error name>, "message":
<sentence>}`` with the HTTP status ``status_of`` gives, plus ``leader`` on NOT_CONTROLLER (the
active controller's URL, or null during an election: 421 with a leader, 503 without) and
``snapshot`` / ``log_start_offset`` on SNAPSHOT_REQUIRED (409). ``redirect_of`` is the one
reading of a NOT_CONTROLLER answer: the leader to resend to, if any (DESIGN.md §3.1: clients
retry at the controller a NOT_CONTROLLER names, as Kafka's clients do).
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.json_fields import Fields, JsonObject
from pykraft.protocol.errors import Errors

# Kafka's default message for each error (the exception's message when none is given).
_DEFAULT_MESSAGES: dict[Errors, str] = {
    Errors.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing "
    "the request.",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    Errors.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error "
    "indicates that the broker is not the current leader.",
    Errors.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on "
    "the broker.",
    Errors.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    Errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    Errors.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    Errors.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    Errors.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    Errors.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    Errors.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    Errors.NEW_LEADER_ELECTED: "The AlterPartition request successfully updated the partition "
    "state but the leader has changed.",
    Errors.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
}


@attrs.frozen
class ApiError:
    """An error code with a human sentence (Kafka's ``ApiError``); ``SUCCESS`` is no error."""

    error: Errors
    message: str | None = None

    @classmethod
    def of(cls, error: Errors, message: str | None = None) -> ApiError:
        """An error with ``message``, or Kafka's default message for ``error``."""
        return cls(error, message if message is not None else _DEFAULT_MESSAGES.get(error))

    @property
    def code(self) -> int:
        return self.error.code

    @property
    def name(self) -> str:
        return self.error.name

    def is_success(self) -> bool:
        return self.error is Errors.NONE

    def is_failure(self) -> bool:
        return self.error is not Errors.NONE


SUCCESS = ApiError(Errors.NONE)


# The HTTP status of each Kafka error a request can be refused with as a whole; any other error
# is a 400. NOT_CONTROLLER is 421 when the leader is known and 503 (NO_LEADER_STATUS) during an
# election, when the client must try another controller rather than be redirected.
_STATUS: dict[Errors, int] = {
    Errors.UNKNOWN_SERVER_ERROR: 500,
    Errors.NOT_CONTROLLER: 421,
    Errors.REQUEST_TIMED_OUT: 503,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: 404,
    Errors.UNKNOWN_TOPIC_ID: 404,
    Errors.BROKER_ID_NOT_REGISTERED: 404,
    Errors.TOPIC_ALREADY_EXISTS: 409,
    Errors.STALE_BROKER_EPOCH: 409,
    Errors.DUPLICATE_BROKER_REGISTRATION: 409,
    Errors.FENCED_LEADER_EPOCH: 409,
    Errors.INVALID_UPDATE_VERSION: 409,
    Errors.ELECTION_NOT_NEEDED: 409,
    # Issue 11's doors: who is asking is unknown (401) or may not do this (403).
    Errors.SASL_AUTHENTICATION_FAILED: 401,
    Errors.CLUSTER_AUTHORIZATION_FAILED: 403,
    Errors.TOPIC_AUTHORIZATION_FAILED: 403,
    Errors.GROUP_AUTHORIZATION_FAILED: 403,
}
NO_LEADER_STATUS = 503
# Errors of the HTTP API itself, not Kafka's (their names are the body's ``error``).
NOT_FOUND = "NOT_FOUND"
METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
REQUEST_TOO_LARGE = "REQUEST_TOO_LARGE"
SNAPSHOT_REQUIRED = "SNAPSHOT_REQUIRED"
SNAPSHOT_NOT_FOUND = "SNAPSHOT_NOT_FOUND"


def status_of(error: Errors, leader_known: bool = True) -> int:
    if error is Errors.NOT_CONTROLLER and not leader_known:
        return NO_LEADER_STATUS
    return _STATUS.get(error, 400)


@attrs.frozen(kw_only=True)
class SnapshotRef:
    """A controller snapshot: its id, the first offset after it (exclusive, Kafka's snapshot id
    end offset) and the epoch of its last record."""

    snapshot_id: str
    end_offset: int
    epoch: int


def snapshot_ref_to_json(snapshot: SnapshotRef) -> JsonObject:
    return {"id": snapshot.snapshot_id, "end_offset": snapshot.end_offset, "epoch": snapshot.epoch}


def snapshot_ref_from_json(fields: Fields) -> SnapshotRef:
    return SnapshotRef(
        snapshot_id=fields.string("id"),
        end_offset=fields.integer("end_offset"),
        epoch=fields.integer("epoch"),
    )


@attrs.frozen(kw_only=True)
class ErrorBody:
    """The body of every failed request; ``error`` is a Kafka error name or one of the API's."""

    error: str
    message: str
    # NOT_CONTROLLER only: the active controller's base URL and node id, None while none is known.
    leader: str | None = None
    leader_id: int | None = None
    # SNAPSHOT_REQUIRED only: the snapshot to load, and where the retained log starts.
    snapshot: SnapshotRef | None = None
    log_start_offset: int | None = None

    @classmethod
    def of(cls, error: ApiError, context: str = "") -> ErrorBody:
        """The body refusing a request with ``error``; Kafka's messages are sentences without the
        full stop, ours end with one."""
        message = error.message or error.name
        if not message.endswith((".", "!", "?")):
            message += "."
        return cls(error=error.name, message=f"{context}{message}")


def redirect_of(body: ErrorBody) -> str | None:
    """The controller to resend to at once: the leader a NOT_CONTROLLER answer names."""
    if body.error != Errors.NOT_CONTROLLER.name or not body.leader:
        return None
    return body.leader


def error_body_to_json(body: ErrorBody) -> JsonObject:
    answer: JsonObject = {"error": body.error, "message": body.message}
    if body.leader is not None or body.error == Errors.NOT_CONTROLLER.name:
        answer["leader"] = body.leader
    if body.leader_id is not None:
        answer["leader_id"] = body.leader_id
    if body.error == SNAPSHOT_REQUIRED:
        answer["snapshot"] = None if body.snapshot is None else snapshot_ref_to_json(body.snapshot)
        answer["log_start_offset"] = body.log_start_offset
    return answer


def error_body_from_json(fields: Fields) -> ErrorBody:
    snapshot = fields.optional_object("snapshot")
    return ErrorBody(
        error=fields.string("error"),
        message=fields.string("message"),
        leader=fields.optional_string("leader"),
        leader_id=fields.optional_integer("leader_id"),
        snapshot=None if snapshot is None else snapshot_ref_from_json(snapshot),
        log_start_offset=fields.optional_integer("log_start_offset"),
    )


def error_field_to_json(error: ApiError) -> JsonObject:
    """The ``error`` / ``message`` pair of one result inside a successful answer."""
    return {"error": error.name, "message": error.message}


def error_field_from_json(fields: Fields) -> ApiError:
    """An ``error`` name this side does not know reads as UNKNOWN_SERVER_ERROR (Kafka's
    ``Errors.forCode`` does the same for an unknown code)."""
    name = fields.string("error")
    return ApiError(
        Errors.__members__.get(name, Errors.UNKNOWN_SERVER_ERROR), fields.optional_string("message")
    )
