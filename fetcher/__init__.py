"""Follower-side replication: the truncation decision and fetch state (pure cores), the asyncio
``ReplicaFetcher`` shells, their ``ReplicaFetcherManager`` and the Kafka-protocol leader client.

The broker composes it as
``ReplicaFetcherManager(FetcherConfig(...), log_manager.get_log, clock=clock)``.
"""

from pykraft.fetcher.fetcher_config import FetcherConfig, FetcherConfigError, PartitionStart
from pykraft.fetcher.fetcher_manager import FetcherKey, ReplicaFetcherManager
from pykraft.fetcher.follower_log import ReplicaLog
from pykraft.fetcher.leader_endpoint import KafkaLeaderEndpoint, LeaderEndpoint, LeaderEndpointError
from pykraft.fetcher.replica_fetcher import ReplicaFetcher

__all__ = [
    "FetcherConfig",
    "FetcherConfigError",
    "FetcherKey",
    "KafkaLeaderEndpoint",
    "LeaderEndpoint",
    "LeaderEndpointError",
    "PartitionStart",
    "ReplicaFetcher",
    "ReplicaFetcherManager",
    "ReplicaLog",
]
