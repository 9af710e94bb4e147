"""Kafka error codes the controller answers with, and the ``ApiError`` value that carries one.

Names and numeric codes are Kafka's (``org.apache.kafka.common.protocol.Errors``), so a response
can be copied onto the Kafka wire or into the HTTP admin API's ``{"error": NAME, "message": ...}``
unchanged. Only the errors the controller produces are listed.
"""

from __future__ import annotations

import enum

import attrs


class Errors(enum.IntEnum):
    """Kafka's error codes (``Errors.java``), value = the wire code."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_TOPIC_EXCEPTION = 17
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108

    @property
    def code(self) -> int:
        return int(self.value)


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
