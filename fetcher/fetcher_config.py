"""Settings and small values shared by the replica fetchers and their manager."""

from __future__ import annotations

import uuid

import attrs

from pykraft.fetcher.broker_connection import ClientSecurity


class FetcherConfigError(ValueError):
    """A ``replica.*`` setting a fetcher cannot work with."""


@attrs.frozen
class FetcherConfig:
    """The ``replica.*`` settings a follower fetches with; defaults are Kafka's."""

    replica_id: int  # this broker's node.id
    num_replica_fetchers: int = 1
    fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    fetch_min_bytes: int = 1  # replica.fetch.min.bytes
    fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes, per partition
    fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms
    socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    # TLS and SASL towards the leaders' inter.broker.listener.name (issue 11).
    client_security: ClientSecurity = attrs.field(factory=ClientSecurity)

    def __attrs_post_init__(self) -> None:
        checks = [
            (self.replica_id >= 0, "node.id must not be negative"),
            (self.num_replica_fetchers >= 1, "num.replica.fetchers must be at least 1"),
            (self.fetch_wait_max_ms >= 0, "replica.fetch.wait.max.ms must not be negative"),
            (self.fetch_min_bytes >= 1, "replica.fetch.min.bytes must be at least 1"),
            (self.fetch_max_bytes >= 0, "replica.fetch.max.bytes must not be negative"),
            (
                self.fetch_response_max_bytes >= 0,
                "replica.fetch.response.max.bytes must not be negative",
            ),
            (self.fetch_backoff_ms >= 0, "replica.fetch.backoff.ms must not be negative"),
            (
                self.socket_timeout_ms >= self.fetch_wait_max_ms,
                "replica.socket.timeout.ms must be at least replica.fetch.wait.max.ms",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise FetcherConfigError(f"{message}: {self}")


@attrs.frozen
class PartitionStart:
    """What a fetcher needs to (re)start a partition (Kafka's ``InitialFetchState``)."""

    topic_id: uuid.UUID | None
    current_leader_epoch: int
