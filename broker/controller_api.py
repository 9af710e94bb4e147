"""What the broker needs from the active controller: its failures and the admin calls' types.

Everything in the broker that talks to the controller — the admin and group handlers, the
metadata loader, heartbeats, producer-id blocks, ``controller_client.py`` which implements it
all over HTTP, and ``pykraft topics`` — raises and catches ``ControllerError``; the handlers are
given a ``ControllerClient`` typed by the protocol below, named after the controller's routes.

Kafka brokers forward CreateTopics, DeleteTopics and CreatePartitions to the active controller
(KIP-590 forwarding); pykraft's controller serves them over HTTP (``quorum/service_admin.py``):

  create_topic        POST   /v1/topics
  delete_topic        DELETE /v1/topics/{name}
  create_partitions   POST   /v1/topics/{name}/partitions
  describe_configs    GET    /v1/configs/{topic|broker}/{name}

An implementation (aiohttp, written elsewhere) follows NOT_CONTROLLER redirects itself and
raises ``ControllerError`` for every failure — a rejected request (the controller's ``error``
field is a Kafka error name, e.g. TOPIC_ALREADY_EXISTS) as well as an unreachable controller
(REQUEST_TIMED_OUT, or NOT_CONTROLLER when no leader is known). The handlers map the name back to
Kafka's error code; nothing else may escape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from protocol.errors import Errors


class ControllerError(Exception):
    """The controller refused the request, or could not be reached."""

    def __init__(self, error: str, message: str) -> None:
        super().__init__(f"{error}: {message}")
        self.error = error
        self.message = message

    @property
    def code(self) -> Errors:
        """The Kafka error code named by ``error`` (UNKNOWN_SERVER_ERROR for other names)."""
        return Errors.__members__.get(self.error, Errors.UNKNOWN_SERVER_ERROR)


@attrs.frozen(kw_only=True)
class NewTopic:
    """A CreateTopics entry; -1 partitions / replication factor take the cluster defaults."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    # Partition -> broker ids; when given, num_partitions and replication_factor are -1.
    assignments: Mapping[int, Sequence[int]] = attrs.field(factory=dict)
    configs: Mapping[str, str | None] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CreatedTopic:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int


@attrs.frozen(kw_only=True)
class DeletedTopic:
    name: str
    topic_id: str


class ControllerClient(Protocol):
    async def create_topic(self, topic: NewTopic, *, validate_only: bool) -> CreatedTopic: ...

    async def delete_topic(self, name: str) -> DeletedTopic: ...

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool,
    ) -> None: ...

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        """``resource_type`` is "topic" or "broker"; every config with its effective value."""
        ...
