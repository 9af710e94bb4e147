"""Kafka's per-topic throughput meters and the ISR change meters, as Prometheus counters.

Kafka's ``BrokerTopicStats`` keeps a ``BrokerTopicMetrics`` per topic and one for all topics
(``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec[,topic=T]``, ``BytesInPerSec``,
``BytesOutPerSec``, ``ReplicationBytesInPerSec``, ``ReplicationBytesOutPerSec``); its
``ReplicaManager`` marks ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` when an ISR change the
leader proposed is committed (``Partition.handleAlterPartitionUpdate`` → the
``AlterPartitionListener``'s ``markShrink`` / ``markExpand``). A meter's ``Count`` is what the
Prometheus JMX exporter's Kafka rules (``kafka-2_0_0.yml``: ``kafka.(\\w+)<type=(.+),
name=(.+)PerSec\\w*, …><>Count`` → ``kafka_$1_$2_$3_total``, lower-cased) expose, so these are
counters named ``kafka_server_brokertopicmetrics_messagesin_total`` and so on; Prometheus takes
the rate.

Where Kafka marks them, and so where pykraft calls these:
- messages and bytes in: ``ReplicaManager.appendToLocalLog`` after each partition's successful
  leader append, with the records' size and appended message count (``broker/local_append.py``);
- bytes out: ``KafkaApis.handleFetchRequest`` per partition answered, consumer reads as
  ``BytesOutPerSec``, follower reads as ``ReplicationBytesOutPerSec`` (``updateBytesOut``);
  replication bytes in: the follower's fetcher after each successful append
  (``ReplicaFetcherThread.processPartitionData``; ``fetcher/replica_fetcher.py``), all topics only
  as Kafka's ``updateReplicationBytesIn``;
- ISR shrinks and expands: a committed AlterPartition (``broker/partition.py``);
- a deleted topic's series go when the broker publishes the deletion
  (``broker/metadata_publisher.py``).

Pure counting; topic labels are bounded by ``MAX_TOPIC_SERIES`` (``TopicCounter``).
"""

from __future__ import annotations

from pykraft.metadata.prometheus import Counter, Family, TopicCounter
from pykraft.metadata.topics_delta import TopicsDelta

# Per-topic series kept per family; past it a topic counts only in the all-topics total.
MAX_TOPIC_SERIES = 10_000


class BrokerTopicStats:
    """The broker's ``BrokerTopicMetrics`` (per topic and all topics) and ISR change meters."""

    def __init__(self, max_topic_series: int = MAX_TOPIC_SERIES) -> None:
        prefix = "kafka_server_brokertopicmetrics_"
        self.messages_in = TopicCounter(
            prefix + "messagesin_total",
            "Messages appended to led partitions (BrokerTopicMetrics MessagesInPerSec).",
            max_topic_series,
        )
        self.bytes_in = TopicCounter(
            prefix + "bytesin_total",
            "Bytes of record batches appended to led partitions (BrokerTopicMetrics "
            "BytesInPerSec).",
            max_topic_series,
        )
        self.bytes_out = TopicCounter(
            prefix + "bytesout_total",
            "Bytes of record batches sent to consumers (BrokerTopicMetrics BytesOutPerSec).",
            max_topic_series,
        )
        self.replication_bytes_out = Counter(
            prefix + "replicationbytesout_total",
            "Bytes of record batches sent to followers (BrokerTopicMetrics "
            "ReplicationBytesOutPerSec).",
        )
        self.replication_bytes_in = Counter(
            prefix + "replicationbytesin_total",
            "Bytes of record batches appended from leaders by this broker's followers "
            "(BrokerTopicMetrics ReplicationBytesInPerSec).",
        )
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks_total",
            "Committed ISR shrinks of partitions this broker leads (ReplicaManager "
            "IsrShrinksPerSec).",
        )
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands_total",
            "Committed ISR expansions of partitions this broker leads (ReplicaManager "
            "IsrExpandsPerSec).",
        )

    def families(self) -> tuple[Family, ...]:
        return (
            self.messages_in,
            self.bytes_in,
            self.bytes_out,
            self.replication_bytes_out,
            self.replication_bytes_in,
            self.isr_shrinks,
            self.isr_expands,
        )

    def record_append(self, topic: str, size_in_bytes: int, messages: int) -> None:
        """A successful leader append (``appendToLocalLog``): Kafka marks the records' size
        even for a duplicate batch, and the messages appended (none for a duplicate)."""
        assert size_in_bytes >= 0 and messages >= 0
        self.bytes_in.inc(topic, size_in_bytes)
        self.messages_in.inc(topic, messages)

    def record_bytes_out(self, topic: str, size_in_bytes: int, *, follower: bool) -> None:
        """A partition's records in a Fetch answer (``BrokerTopicStats.updateBytesOut``)."""
        assert size_in_bytes >= 0
        if follower:
            self.replication_bytes_out.inc(amount=size_in_bytes)
        else:
            self.bytes_out.inc(topic, size_in_bytes)

    def record_replication_bytes_in(self, size_in_bytes: int) -> None:
        """A follower append of ``size_in_bytes`` of the leader's batches."""
        assert size_in_bytes >= 0
        self.replication_bytes_in.inc(amount=size_in_bytes)

    def record_isr_change(self, *, shrink: bool) -> None:
        """A leader's proposed ISR change committed by the controller."""
        (self.isr_shrinks if shrink else self.isr_expands).inc()

    def remove_topic(self, topic: str) -> None:
        for family in (self.messages_in, self.bytes_in, self.bytes_out):
            family.remove(topic)

    def remove_deleted_topics(self, delta: TopicsDelta) -> None:
        """Drop the series of the topics ``delta`` deletes (Kafka's ReplicaManager calls
        ``brokerTopicStats.removeMetrics`` for a deleted topic), so the page lists live topics
        and a re-created topic starts from 0."""
        for topic_id in delta.deleted_topic_ids:
            base = delta.image.by_id.get(topic_id)
            if base is not None:
                self.remove_topic(base.name)
