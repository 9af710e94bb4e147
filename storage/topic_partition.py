"""TopicPartition, the one name of a partition in every package, and its directory names.

Kafka's ``org.apache.kafka.common.TopicPartition``: every layer — the log dirs, the wire
codecs, the replica layer, the fetchers, the coordinators, the metadata's local changes — keys a
partition by this one frozen, ordered value, never by a ``(topic, partition)`` tuple of its own.
Topic name rules are Kafka's ``org.apache.kafka.common.internals.Topic``.

A partition lives in ``<log.dir>/<topic>-<partition>``. Topic names may themselves contain
``-`` (and ``.``, ``_``), so the partition number is whatever follows the LAST ``-``
(Kafka's ``LocalLog.parseTopicPartitionName``). Kafka renames a partition directory it is
deleting to ``<topic>-<partition>.<uuid>-delete`` and creates ``.<uuid>-future`` directories
while moving a replica between log dirs; both still name their topic partition.
"""

from __future__ import annotations

import re

import attrs

# Kafka's org.apache.kafka.common.internals.Topic: legal characters and maximum length.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
# Kafka's LocalLog.DeleteDirPattern / FutureDirPattern: topic-partition.uniqueId-suffix.
_DELETE_DIR = re.compile(r"(\S+)-(\S+)\.(\S+)-delete")
_FUTURE_DIR = re.compile(r"(\S+)-(\S+)\.(\S+)-future")
_PARTITION_NUMBER = re.compile(r"[0-9]+")
MAX_PARTITION = 2**31 - 1  # a Java int


def validate_topic_name(topic: str) -> None:
    """Raise ValueError unless ``topic`` is a legal Kafka topic name (Topic.validate)."""
    if not topic:
        raise ValueError("topic name is empty")
    if topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} is not allowed")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(
            f"topic name is {len(topic)} characters long, the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise ValueError(
            f"topic name {topic!r} contains a character other than ASCII letters, digits, '.', "
            "'_' and '-'"
        )


# cache_hash: a partition is a key in every per-partition map, hashed ~16 times per Produce request.
@attrs.frozen(order=True, cache_hash=True)
class TopicPartition:
    topic: str
    partition: int

    def dir_name(self) -> str:
        """The partition's directory name inside a log dir: ``topic-partition``."""
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.dir_name()

    @classmethod
    def parse_dir_name(cls, name: str) -> TopicPartition:
        """Parse ``topic-partition`` (or a ``.<uuid>-delete`` / ``.<uuid>-future`` variant).

        Raises ValueError saying what is wrong: no '-', empty topic, a partition that is not
        a non-negative 32-bit integer, an illegal topic name.
        """
        base = _strip_delete_or_future(name)
        topic, dash, partition_text = base.rpartition("-")
        if not dash:
            raise ValueError(f"directory {name!r} is not in the form topic-partition: no '-'")
        if not topic:
            raise ValueError(f"directory {name!r} is not in the form topic-partition: empty topic")
        if not _PARTITION_NUMBER.fullmatch(partition_text):
            # Digits only: no sign, so no negative partition. Like Kafka, "t--1" is partition 1
            # of the (legal) topic "t-", never partition -1 of "t".
            raise ValueError(
                f"directory {name!r} is not in the form topic-partition: partition "
                f"{partition_text!r} is not a non-negative integer"
            )
        partition = int(partition_text)
        if partition > MAX_PARTITION:
            raise ValueError(
                f"directory {name!r}: partition {partition} does not fit in a 32-bit integer"
            )
        try:
            validate_topic_name(topic)
        except ValueError as error:
            raise ValueError(f"directory {name!r}: {error}") from None
        return cls(topic, partition)


def _strip_delete_or_future(name: str) -> str:
    """Drop Kafka's ``.<uniqueId>-delete`` / ``-future`` suffix, checking its shape."""
    for suffix, pattern in ((DELETE_DIR_SUFFIX, _DELETE_DIR), (FUTURE_DIR_SUFFIX, _FUTURE_DIR)):
        if name.endswith(suffix):
            if not pattern.fullmatch(name):
                raise ValueError(
                    f"directory {name!r} is not in the form topic-partition.uniqueId{suffix}"
                )
            return name[: name.rindex(".")]
    return name


def is_deleted_dir(name: str) -> bool:
    """True for Kafka's ``topic-partition.<uuid>-delete`` directories (pending deletion)."""
    return _DELETE_DIR.fullmatch(name) is not None


def is_future_dir(name: str) -> bool:
    """True for Kafka's ``topic-partition.<uuid>-future`` directories (a replica being moved)."""
    return _FUTURE_DIR.fullmatch(name) is not None


def delete_dir_name(topic_partition: TopicPartition, unique_id: str) -> str:
    """The name Kafka renames a partition directory to before deleting it (LocalLog)."""
    if not unique_id or not unique_id.isalnum():
        raise ValueError(f"unique id {unique_id!r} must be non-empty and alphanumeric")
    return f"{topic_partition.dir_name()}.{unique_id}{DELETE_DIR_SUFFIX}"
