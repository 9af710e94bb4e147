"""Apache Kafka 3.9's ApiVersions answer on a KRaft broker's listener: the reference table.

Source: Kafka 3.9.0 (git branch ``3.9``), ``clients/src/main/resources/common/message/
*Request.json`` — each request's ``validVersions``, for the schemas whose ``listeners`` name
``broker`` and that are not ``latestVersionUnstable`` (the share-group APIs of KIP-932 are, and
their only version is unstable, so ``ApiVersionsResponse.filterApis`` leaves them out). A
KRaft broker advertises exactly these (``ApiVersionManager``/``DefaultApiVersionManager``:
``ApiKeys.apisForListener(BROKER)``; the APIs it forwards to the controller are intersected with
the controller's ranges, which are the same schemas), except GetTelemetrySubscriptions and
PushTelemetry (KIP-714), advertised only when a client-telemetry receiver is configured — none
is by default, so they are left out here too.

``protocol.apis.SUPPORTED_API_VERSIONS`` is checked against this table by
``tests/protocol/test_api_versions_table.py``; every difference is listed there with its reason.
Facts only (key, minimum, maximum); no schema text is copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pykraft.protocol.api_keys import ApiKey

KAFKA_3_9_BROKER_API_VERSIONS: Mapping[ApiKey, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (0, 11),
        ApiKey.FETCH: (0, 17),
        ApiKey.LIST_OFFSETS: (0, 9),
        ApiKey.METADATA: (0, 12),
        ApiKey.OFFSET_COMMIT: (0, 9),
        ApiKey.OFFSET_FETCH: (0, 9),
        ApiKey.FIND_COORDINATOR: (0, 6),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (0, 7),
        ApiKey.DELETE_TOPICS: (0, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 4),
        ApiKey.WRITE_TXN_MARKERS: (0, 1),
        ApiKey.TXN_OFFSET_COMMIT: (0, 4),
        ApiKey.DESCRIBE_ACLS: (0, 3),
        ApiKey.CREATE_ACLS: (0, 3),
        ApiKey.DELETE_ACLS: (0, 3),
        ApiKey.DESCRIBE_CONFIGS: (0, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (0, 2),
        ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.CREATE_DELEGATION_TOKEN: (0, 3),
        ApiKey.RENEW_DELEGATION_TOKEN: (0, 2),
        ApiKey.EXPIRE_DELEGATION_TOKEN: (0, 2),
        ApiKey.DESCRIBE_DELEGATION_TOKEN: (0, 3),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.OFFSET_DELETE: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_QUORUM: (0, 2),
        ApiKey.UPDATE_FEATURES: (0, 1),
        ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.UNREGISTER_BROKER: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 0),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 0),
        ApiKey.LIST_CONFIG_RESOURCES: (0, 0),  # ListClientMetricsResources in 3.9 (KIP-714)
        ApiKey.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
        ApiKey.ADD_RAFT_VOTER: (0, 0),
        ApiKey.REMOVE_RAFT_VOTER: (0, 0),
    }
)

# Message formats v0/v1 (pre-KIP-98 message sets): Kafka 3.9 still serves these versions by
# converting; pykraft stores only RecordBatch v2, so it advertises them and answers
# UNSUPPORTED_VERSION, as Kafka 4 does for Produce (KIP-896, KAFKA-18659).
LEGACY_MESSAGE_FORMAT_VERSIONS: Mapping[ApiKey, range] = MappingProxyType(
    {ApiKey.PRODUCE: range(0, 3), ApiKey.FETCH: range(0, 4)}
)
LEGACY_PRODUCE_VERSIONS = LEGACY_MESSAGE_FORMAT_VERSIONS[ApiKey.PRODUCE]
LEGACY_FETCH_VERSIONS = LEGACY_MESSAGE_FORMAT_VERSIONS[ApiKey.FETCH]
