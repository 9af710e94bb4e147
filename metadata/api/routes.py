"""Every route of the controller's HTTP API: its method, path and whether a client may resend it.

The controller registers its handlers from this table (``quorum/service*.py``) and the broker's
client builds its requests from it (``broker/controller_client.py``), so a path is spelled once.
``idempotent`` is what the client may do with a request whose outcome is unknown (timed out
after it was sent): resend it, or report the failure — creating a topic twice would answer
TOPIC_ALREADY_EXISTS for a topic this very call created.
"""

from __future__ import annotations

from urllib.parse import quote

import attrs


@attrs.frozen
class Route:
    method: str
    # aiohttp's template: ``{name}`` segments are filled by ``path``.
    template: str
    idempotent: bool = True

    def path(self, **segments: str | int) -> str:
        """The path with each ``{segment}`` filled in, '/' and other reserved characters
        escaped."""
        return self.template.format(
            **{name: quote(str(value), safe="") for name, value in segments.items()}
        )


# Broker RPCs (``brokers.py``). Registration is idempotent for one incarnation id; a heartbeat
# and an AlterPartition carry the epochs that make a resend harmless; a producer-id block is not.
REGISTER_BROKER = Route("POST", "/v1/brokers/register")
BROKER_HEARTBEAT = Route("POST", "/v1/brokers/heartbeat")
UNREGISTER_BROKER = Route("DELETE", "/v1/brokers/{broker_id}")
ALTER_PARTITION = Route("POST", "/v1/alter-partition")
ALLOCATE_PRODUCER_IDS = Route("POST", "/v1/producer-ids", idempotent=False)

# The metadata log (``records.py``).
METADATA_RECORDS = Route("GET", "/v1/metadata/records")
LIST_SNAPSHOTS = Route("GET", "/v1/metadata/snapshots")
GET_SNAPSHOT = Route("GET", "/v1/metadata/snapshots/{snapshot_id}")

# Admin (``topics.py``, ``admin.py``). Creating and deleting are idempotent only when they
# validate without writing (``validate_only``): the client decides per request.
CLUSTER = Route("GET", "/v1/cluster")
QUORUM = Route("GET", "/v1/quorum")
OPENAPI = Route("GET", "/v1/openapi.json")
LIST_BROKERS = Route("GET", "/v1/brokers")
LIST_TOPICS = Route("GET", "/v1/topics")
CREATE_TOPIC = Route("POST", "/v1/topics", idempotent=False)
DESCRIBE_TOPIC = Route("GET", "/v1/topics/{name}")
DELETE_TOPIC = Route("DELETE", "/v1/topics/{name}", idempotent=False)
CREATE_PARTITIONS = Route("POST", "/v1/topics/{name}/partitions", idempotent=False)
ELECT_LEADERS = Route("POST", "/v1/elections")
DESCRIBE_CONFIGS = Route("GET", "/v1/configs/{resource_type}/{resource_name}")
ALTER_CONFIGS = Route("PUT", "/v1/configs/{resource_type}/{resource_name}")

ROUTES: tuple[Route, ...] = (
    REGISTER_BROKER,
    BROKER_HEARTBEAT,
    UNREGISTER_BROKER,
    ALTER_PARTITION,
    ALLOCATE_PRODUCER_IDS,
    METADATA_RECORDS,
    LIST_SNAPSHOTS,
    GET_SNAPSHOT,
    CLUSTER,
    QUORUM,
    OPENAPI,
    LIST_BROKERS,
    LIST_TOPICS,
    CREATE_TOPIC,
    DESCRIBE_TOPIC,
    DELETE_TOPIC,
    CREATE_PARTITIONS,
    ELECT_LEADERS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
)
