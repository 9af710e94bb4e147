"""Which replica fetcher serves a partition: Kafka's ``AbstractFetcherManager.getFetcherId``.

A follower broker runs ``num.replica.fetchers`` fetchers per leader broker and spreads its
partitions over them with ``Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers``,
in Java ``int`` arithmetic (``protocol/java_hash.py``), so a partition lands on the same fetcher
as in Kafka.
"""

from __future__ import annotations

from pykraft.protocol.java_hash import java_string_hash, kafka_abs


def fetcher_id(topic: str, partition: int, num_replica_fetchers: int) -> int:
    """The fetcher (0 .. ``num_replica_fetchers`` - 1) that replicates ``topic``-``partition``."""
    if num_replica_fetchers < 1:
        raise ValueError(f"num.replica.fetchers must be at least 1, got {num_replica_fetchers}")
    if partition < 0:
        raise ValueError(f"partition must not be negative, got {partition}")
    return kafka_abs(31 * java_string_hash(topic) + partition) % num_replica_fetchers
