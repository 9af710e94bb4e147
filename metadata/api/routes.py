"""Every route of the controller's HTTP API: its method, path, whether a client may resend it,
and what the caller must be allowed to do.

The controller registers its handlers from this table (``quorum/service*.py``) and the broker's
client builds its requests from it (``broker/controller_client.py``), so a path is spelled once.
``idempotent`` is what the client may do with a request whose outcome is unknown (timed out
after it was sent): resend it, or report the failure — creating a topic twice would answer
TOPIC_ALREADY_EXISTS for a topic this very call created.

``access`` is the authorization column (issue 11): the Kafka ``AclOperation`` the caller needs
and on which resource, the checks Kafka's ``ControllerApis`` makes for the same request
(``authHelper.authorizeClusterOperation`` / ``authorize``): broker registration, heartbeat,
AlterPartition, producer-id blocks and the metadata log and its snapshots (Kafka's Fetch and
FetchSnapshot) need CLUSTER_ACTION on the cluster; UnregisterBroker and ElectLeaders ALTER on the
cluster; DescribeQuorum DESCRIBE on the cluster; CreateTopics CREATE on the cluster or on the
topic, DeleteTopics DELETE on the cluster or on the topic (``hasClusterAuth``); CreatePartitions
ALTER on the topic; DescribeConfigs / IncrementalAlterConfigs DESCRIBE_CONFIGS / ALTER_CONFIGS on
the topic, or on the cluster for a broker's configs; the ACL and SCRAM routes ALTER (writes) or
DESCRIBE (reads) on the cluster. Routes of the broker RPCs also name the
broker (``own_broker``): the caller must be that broker's principal (``quorum/auth.py``), which
Kafka does not check and our HTTP door needs. A route added without a column needs ALTER on the
cluster: safe by default.
"""

from __future__ import annotations

import enum
from urllib.parse import quote

import attrs


class ResourceOf(enum.Enum):
    """Where the resource a route is authorized on comes from."""

    # Authentication only: the OpenAPI document holds no cluster data.
    NONE = "none"
    # The cluster (Kafka's ``Resource.CLUSTER_NAME``, "kafka-cluster").
    CLUSTER = "cluster"
    # The topic named by the path's ``{name}``.
    TOPIC_IN_PATH = "topic_in_path"
    # The topic named in the body; checked once the body is read.
    TOPIC_IN_BODY = "topic_in_body"
    # ``{resource_type}/{resource_name}``: a topic, or the cluster for a broker's configs.
    CONFIG_IN_PATH = "config_in_path"
    # The answer lists only the topics the caller may DESCRIBE (Kafka's Metadata hides the rest).
    TOPICS_LISTED = "topics_listed"
    # The consumer group named by the path's ``{group}`` (Kafka's GROUP resource).
    GROUP_IN_PATH = "group_in_path"


@attrs.frozen
class Access:
    """What a caller must be allowed: ``operation`` (Kafka's ``AclOperation`` name) on
    ``resource``."""

    operation: str
    resource: ResourceOf
    # CREATE / DELETE on the cluster grants the operation on every topic (ControllerApis'
    # ``hasClusterAuth`` for CreateTopics and DeleteTopics).
    cluster_grants: bool = False
    # The body names a broker id: the caller must be that broker (quorum/auth.py BrokerBinding).
    own_broker: bool = False


CLUSTER_ACTION = Access("CLUSTER_ACTION", ResourceOf.CLUSTER)
BROKER_ACTION = Access("CLUSTER_ACTION", ResourceOf.CLUSTER, own_broker=True)
ALTER_CLUSTER = Access("ALTER", ResourceOf.CLUSTER)
DESCRIBE_CLUSTER = Access("DESCRIBE", ResourceOf.CLUSTER)
AUTHENTICATED = Access("DESCRIBE", ResourceOf.NONE)


@attrs.frozen
class Route:
    method: str
    # aiohttp's template: ``{name}`` segments are filled by ``path``.
    template: str
    idempotent: bool = True
    access: Access = ALTER_CLUSTER

    def path(self, **segments: str | int) -> str:
        """The path with each ``{segment}`` filled in, '/' and other reserved characters
        escaped."""
        return self.template.format(
            **{name: quote(str(value), safe="") for name, value in segments.items()}
        )


# Broker RPCs (``brokers.py``). Registration is idempotent for one incarnation id; a heartbeat
# and an AlterPartition carry the epochs that make a resend harmless; a producer-id block is not.
REGISTER_BROKER = Route("POST", "/v1/brokers/register", access=BROKER_ACTION)
BROKER_HEARTBEAT = Route("POST", "/v1/brokers/heartbeat", access=BROKER_ACTION)
UNREGISTER_BROKER = Route("DELETE", "/v1/brokers/{broker_id}", access=ALTER_CLUSTER)
ALTER_PARTITION = Route("POST", "/v1/alter-partition", access=BROKER_ACTION)
ALLOCATE_PRODUCER_IDS = Route("POST", "/v1/producer-ids", idempotent=False, access=BROKER_ACTION)

# The metadata log (``records.py``): Kafka's Fetch and FetchSnapshot of ``__cluster_metadata``.
METADATA_RECORDS = Route("GET", "/v1/metadata/records", access=CLUSTER_ACTION)
LIST_SNAPSHOTS = Route("GET", "/v1/metadata/snapshots", access=CLUSTER_ACTION)
GET_SNAPSHOT = Route("GET", "/v1/metadata/snapshots/{snapshot_id}", access=CLUSTER_ACTION)

# Admin (``topics.py``, ``admin.py``). Creating and deleting are idempotent only when they
# validate without writing (``validate_only``): the client decides per request.
CLUSTER = Route("GET", "/v1/cluster", access=DESCRIBE_CLUSTER)
QUORUM = Route("GET", "/v1/quorum", access=DESCRIBE_CLUSTER)
# Kafka's DescribeQuorum (``quorum.py``): ControllerApis.handleDescribeQuorum checks DESCRIBE.
DESCRIBE_QUORUM = Route("GET", "/v1/quorum/describe", access=DESCRIBE_CLUSTER)
# KIP-853 (``voters.py``): Kafka's ControllerApis.handleAddRaftVoter / handleRemoveRaftVoter
# check ALTER on the cluster. Not resent: a second add of the same voter is DUPLICATE_VOTER.
ADD_RAFT_VOTER = Route("POST", "/v1/quorum/voters/add", idempotent=False, access=ALTER_CLUSTER)
REMOVE_RAFT_VOTER = Route(
    "POST", "/v1/quorum/voters/remove", idempotent=False, access=ALTER_CLUSTER
)
OPENAPI = Route("GET", "/v1/openapi.json", access=AUTHENTICATED)
# Prometheus text in Kafka's metric names (quorum/metrics.py); described like /v1/cluster.
METRICS = Route("GET", "/metrics", access=DESCRIBE_CLUSTER)
LIST_BROKERS = Route("GET", "/v1/brokers", access=DESCRIBE_CLUSTER)
LIST_TOPICS = Route("GET", "/v1/topics", access=Access("DESCRIBE", ResourceOf.TOPICS_LISTED))
CREATE_TOPIC = Route(
    "POST",
    "/v1/topics",
    idempotent=False,
    access=Access("CREATE", ResourceOf.TOPIC_IN_BODY, cluster_grants=True),
)
DESCRIBE_TOPIC = Route(
    "GET", "/v1/topics/{name}", access=Access("DESCRIBE", ResourceOf.TOPIC_IN_PATH)
)
DELETE_TOPIC = Route(
    "DELETE",
    "/v1/topics/{name}",
    idempotent=False,
    access=Access("DELETE", ResourceOf.TOPIC_IN_PATH, cluster_grants=True),
)
CREATE_PARTITIONS = Route(
    "POST",
    "/v1/topics/{name}/partitions",
    idempotent=False,
    access=Access("ALTER", ResourceOf.TOPIC_IN_PATH),
)
ELECT_LEADERS = Route("POST", "/v1/elections", access=ALTER_CLUSTER)
# Partition reassignment (``reassignments.py``, KIP-455): ControllerApis needs ALTER on the
# cluster to alter and DESCRIBE on it to list. A resent cancel would answer
# NO_REASSIGNMENT_IN_PROGRESS for a cancel this very call made.
ALTER_PARTITION_REASSIGNMENTS = Route(
    "POST", "/v1/reassignments", idempotent=False, access=ALTER_CLUSTER
)
LIST_PARTITION_REASSIGNMENTS = Route("GET", "/v1/reassignments", access=DESCRIBE_CLUSTER)
DESCRIBE_CONFIGS = Route(
    "GET",
    "/v1/configs/{resource_type}/{resource_name}",
    access=Access("DESCRIBE_CONFIGS", ResourceOf.CONFIG_IN_PATH),
)
ALTER_CONFIGS = Route(
    "PUT",
    "/v1/configs/{resource_type}/{resource_name}",
    access=Access("ALTER_CONFIGS", ResourceOf.CONFIG_IN_PATH),
)
# Every resource of one (Incremental)AlterConfigs request, applied as one ControllerResult
# (``config_batch.py``): the forwarding broker has authorized each resource with the client's
# principal; an operator needs ALTER_CONFIGS on the cluster, which covers every resource.
ALTER_CONFIGS_BATCH = Route(
    "POST", "/v1/configs", access=Access("ALTER_CONFIGS", ResourceOf.CLUSTER)
)

# ACLs and SCRAM credentials (``security.py``). Creating an ACL twice is harmless (no
# duplicate, success); a resent deletion would report nothing deleted, or RESOURCE_NOT_FOUND.
# Kafka's AclApis and ControllerApis: CreateAcls / DeleteAcls and AlterUserScramCredentials need
# ALTER on the cluster, DescribeAcls and DescribeUserScramCredentials DESCRIBE on the cluster.
CREATE_ACLS = Route("POST", "/v1/acls", access=ALTER_CLUSTER)
DESCRIBE_ACLS = Route("GET", "/v1/acls", access=DESCRIBE_CLUSTER)
DELETE_ACLS = Route("DELETE", "/v1/acls", idempotent=False, access=ALTER_CLUSTER)
ALTER_SCRAM_CREDENTIALS = Route(
    "POST", "/v1/scram-credentials", idempotent=False, access=ALTER_CLUSTER
)
DESCRIBE_SCRAM_CREDENTIALS = Route("GET", "/v1/scram-credentials", access=DESCRIBE_CLUSTER)

# Client quotas (``client_quotas.py``, KIP-546): AlterClientQuotas needs ALTER_CONFIGS on the
# cluster (ControllerApis.handleAlterClientQuotas). Setting the same values again writes nothing,
# and a removal of an absent key neither: a resend is harmless.
ALTER_CLIENT_QUOTAS = Route(
    "POST", "/v1/client-quotas", access=Access("ALTER_CONFIGS", ResourceOf.CLUSTER)
)
# DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster (KafkaApis); a read, with a JSON filter.
DESCRIBE_CLIENT_QUOTAS = Route(
    "POST", "/v1/client-quotas/describe", access=Access("DESCRIBE_CONFIGS", ResourceOf.CLUSTER)
)
# Finalized feature levels (``features.py``, KIP-584): ControllerApis.handleUpdateFeatures needs
# ALTER on the cluster. A resend writes the same levels again: harmless.
UPDATE_FEATURES = Route("POST", "/v1/features", access=ALTER_CLUSTER)
# Delegation tokens (``delegation_tokens.py``, KIP-48): brokers forward Kafka's Create, Renew
# and ExpireDelegationToken with the principal they authenticated in the body, so only a broker
# may call them (CLUSTER_ACTION, as Kafka's envelope forwarding needs). A resend would create a
# second token, or renew again: not idempotent.
CREATE_DELEGATION_TOKEN = Route(
    "POST", "/v1/delegation-tokens", idempotent=False, access=CLUSTER_ACTION
)
RENEW_DELEGATION_TOKEN = Route(
    "POST", "/v1/delegation-tokens/renew", idempotent=False, access=CLUSTER_ACTION
)
EXPIRE_DELEGATION_TOKEN = Route(
    "POST", "/v1/delegation-tokens/expire", idempotent=False, access=CLUSTER_ACTION
)

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
    DESCRIBE_QUORUM,
    ADD_RAFT_VOTER,
    REMOVE_RAFT_VOTER,
    OPENAPI,
    METRICS,
    LIST_BROKERS,
    LIST_TOPICS,
    CREATE_TOPIC,
    DESCRIBE_TOPIC,
    DELETE_TOPIC,
    CREATE_PARTITIONS,
    ELECT_LEADERS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    ALTER_CONFIGS_BATCH,
    CREATE_ACLS,
    DESCRIBE_ACLS,
    DELETE_ACLS,
    ALTER_SCRAM_CREDENTIALS,
    DESCRIBE_SCRAM_CREDENTIALS,
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLIENT_QUOTAS,
    UPDATE_FEATURES,
    CREATE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
)

# The web console (issue 16, ``quorum/service_console.py``): HTML pages, read-only, under the
# same doors as the API's reads. Not part of the JSON API (``ROUTES``, the OpenAPI document).
# The group list needs DESCRIBE on the cluster (Kafka's ListGroups then lists every group); a
# group's page needs DESCRIBE on that group (DescribeGroups, OffsetFetch), and both drop the
# rows of topics the caller may not DESCRIBE. The journal shows metadata records — broker and
# topic configs, client quotas, ACLs, SCRAM users — so it needs DESCRIBE_CONFIGS on the cluster,
# what Kafka's DescribeConfigs (broker) and DescribeClientQuotas need; sensitive values are
# redacted, records of topics the caller may not DESCRIBE dropped (quorum/console_journal.py).
CONSOLE_OVERVIEW = Route("GET", "/console", access=DESCRIBE_CLUSTER)
CONSOLE_BROKERS = Route("GET", "/console/brokers", access=DESCRIBE_CLUSTER)
CONSOLE_TOPICS = Route(
    "GET", "/console/topics", access=Access("DESCRIBE", ResourceOf.TOPICS_LISTED)
)
CONSOLE_TOPIC = Route(
    "GET", "/console/topics/{name}", access=Access("DESCRIBE", ResourceOf.TOPIC_IN_PATH)
)
CONSOLE_GROUPS = Route("GET", "/console/groups", access=DESCRIBE_CLUSTER)
CONSOLE_GROUP = Route(
    "GET", "/console/groups/{group}", access=Access("DESCRIBE", ResourceOf.GROUP_IN_PATH)
)
CONSOLE_JOURNAL = Route(
    "GET", "/console/journal", access=Access("DESCRIBE_CONFIGS", ResourceOf.CLUSTER)
)
CONSOLE_ROUTES: tuple[Route, ...] = (
    CONSOLE_OVERVIEW,
    CONSOLE_BROKERS,
    CONSOLE_TOPICS,
    CONSOLE_TOPIC,
    CONSOLE_GROUPS,
    CONSOLE_GROUP,
    CONSOLE_JOURNAL,
)
