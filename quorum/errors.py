"""The ``ApiError`` value the controller answers with: a Kafka error code and a sentence.

The codes are ``protocol.errors.Errors`` (Kafka's ``org.apache.kafka.common.protocol.Errors``), so
a response can be copied onto the Kafka wire or into the HTTP admin API's
``{"error": NAME, "message": ...}`` unchanged. Kafka's default messages are listed for the errors
the controller produces.
"""

from __future__ import annotations

import attrs

from protocol.errors import Errors

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
