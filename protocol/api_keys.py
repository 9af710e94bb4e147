"""Kafka's API keys (``org.apache.kafka.common.protocol.ApiKeys``) and their flexible versions.

Names and numbers are Kafka's. ``FIRST_FLEXIBLE_VERSION`` records, for every API the broker
serves and every other API kafka-python has a schema for (the broker answers those with an
error: ``protocol.unsupported``), the first version that uses compact types and tagged fields
(KIP-482); it decides the request header version (2 when flexible) and the response header
version (1 when flexible, except ApiVersions, whose response header is always 0 so any client
can read the error).
The numbers are the ``flexibleVersions`` of Kafka's message JSON schemas, checked in the tests
against the schemas kafka-python generates its classes from.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType


class ApiKey(enum.IntEnum):
    """Every API key Kafka defines (3.7 to 4.1); the broker serves the ones in ``apis``."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


# A first flexible version no version reaches: the API's schema says "flexibleVersions": "none".
NEVER_FLEXIBLE = 2**15

FIRST_FLEXIBLE_VERSION: Mapping[ApiKey, int] = MappingProxyType(
    {
        ApiKey.PRODUCE: 9,
        ApiKey.FETCH: 12,
        ApiKey.LIST_OFFSETS: 6,
        ApiKey.METADATA: 9,
        ApiKey.OFFSET_COMMIT: 8,
        ApiKey.OFFSET_FETCH: 6,
        ApiKey.FIND_COORDINATOR: 3,
        ApiKey.JOIN_GROUP: 6,
        ApiKey.HEARTBEAT: 4,
        ApiKey.LEAVE_GROUP: 4,
        ApiKey.SYNC_GROUP: 4,
        ApiKey.DESCRIBE_GROUPS: 5,
        ApiKey.LIST_GROUPS: 3,
        ApiKey.SASL_HANDSHAKE: NEVER_FLEXIBLE,
        ApiKey.API_VERSIONS: 3,
        ApiKey.CREATE_TOPICS: 5,
        ApiKey.DELETE_TOPICS: 4,
        ApiKey.DELETE_RECORDS: 2,
        ApiKey.INIT_PRODUCER_ID: 2,
        ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
        ApiKey.ADD_PARTITIONS_TO_TXN: 3,
        ApiKey.ADD_OFFSETS_TO_TXN: 3,
        ApiKey.END_TXN: 3,
        ApiKey.WRITE_TXN_MARKERS: 1,
        ApiKey.TXN_OFFSET_COMMIT: 3,
        ApiKey.DESCRIBE_ACLS: 2,
        ApiKey.CREATE_ACLS: 2,
        ApiKey.DELETE_ACLS: 2,
        ApiKey.DESCRIBE_CONFIGS: 4,
        ApiKey.ALTER_CONFIGS: 2,
        ApiKey.ALTER_REPLICA_LOG_DIRS: 2,
        ApiKey.DESCRIBE_LOG_DIRS: 2,
        ApiKey.SASL_AUTHENTICATE: 2,
        ApiKey.CREATE_PARTITIONS: 2,
        ApiKey.DELETE_GROUPS: 2,
        ApiKey.ELECT_LEADERS: 2,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
        ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
        ApiKey.OFFSET_DELETE: NEVER_FLEXIBLE,
        ApiKey.DESCRIBE_CLIENT_QUOTAS: 1,
        ApiKey.ALTER_CLIENT_QUOTAS: 1,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
        ApiKey.DESCRIBE_QUORUM: 0,
        ApiKey.ADD_RAFT_VOTER: 0,
        ApiKey.REMOVE_RAFT_VOTER: 0,
        ApiKey.UNREGISTER_BROKER: 0,
        ApiKey.UPDATE_FEATURES: 0,
        ApiKey.CREATE_DELEGATION_TOKEN: 2,
        ApiKey.RENEW_DELEGATION_TOKEN: 2,
        ApiKey.EXPIRE_DELEGATION_TOKEN: 2,
        ApiKey.DESCRIBE_DELEGATION_TOKEN: 2,
        ApiKey.DESCRIBE_CLUSTER: 0,
        ApiKey.DESCRIBE_PRODUCERS: 0,
        ApiKey.DESCRIBE_TRANSACTIONS: 0,
        ApiKey.LIST_TRANSACTIONS: 0,
        ApiKey.LIST_CONFIG_RESOURCES: 0,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
        ApiKey.CONSUMER_GROUP_HEARTBEAT: 0,
        ApiKey.CONSUMER_GROUP_DESCRIBE: 0,
    }
)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this API version uses compact types and tagged fields; False for unknown APIs."""
    # ApiKey is an IntEnum: an int finds its member's entry without building the member.
    first = FIRST_FLEXIBLE_VERSION.get(api_key)  # type: ignore[call-overload]
    return first is not None and api_version >= first
