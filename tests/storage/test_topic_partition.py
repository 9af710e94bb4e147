"""TopicPartition directory names, following Kafka's LocalLog.parseTopicPartitionName.

Cases cite Kafka's core/src/test/scala/unit/kafka/log/LocalLogTest.scala.
"""

from __future__ import annotations

import pytest

from pykraft.storage.topic_partition import (
    TopicPartition,
    delete_dir_name,
    is_deleted_dir,
    is_future_dir,
    validate_topic_name,
)

UUID = "a1b2c3d4e5f60718293a4b5c6d7e8f90"


def check_parse(name: str, expected: TopicPartition) -> None:
    assert TopicPartition.parse_dir_name(name) == expected


def check_rejects(name: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        TopicPartition.parse_dir_name(name)


def test_parse_dir_name() -> None:
    check_parse("test_topic-143", TopicPartition("test_topic", 143))  # testParseTopicPartitionName
    check_parse("pet-0", TopicPartition("pet", 0))
    check_parse("pet-17", TopicPartition("pet", 17))
    # Topic names may contain '-', '.', '_': split on the LAST '-'.
    check_parse("my-topic-3", TopicPartition("my-topic", 3))
    check_parse("a.b_c-d-12", TopicPartition("a.b_c-d", 12))
    check_parse("__consumer_offsets-49", TopicPartition("__consumer_offsets", 49))
    # "t--1" is partition 1 of topic "t-" (a legal name), exactly as Kafka parses it.
    check_parse("t--1", TopicPartition("t-", 1))
    check_parse("pet-007", TopicPartition("pet", 7))  # Java Integer.parseInt accepts zeros
    check_parse("pet-2147483647", TopicPartition("pet", 2**31 - 1))
    # Kafka's deleted / future directories still name their partition.
    check_parse(f"my-topic-3.{UUID}-delete", TopicPartition("my-topic", 3))
    check_parse(f"my-topic-3.{UUID}-future", TopicPartition("my-topic", 3))
    # testParseTopicPartitionNameWithPeriodForDeletedTopic (KAFKA-5232)
    check_parse(f"foo.bar-testtopic-42.{UUID}-delete", TopicPartition("foo.bar-testtopic", 42))


def test_parse_dir_name_rejects_bad_names() -> None:
    check_rejects("", "no '-'")  # testParseTopicPartitionNameForEmptyName
    # testParseTopicPartitionNameForMissingSeparator
    check_rejects("test_topic1999", "no '-'")
    check_rejects("test_topic1999.-delete", "uniqueId-delete")
    # testParseTopicPartitionNameForMissingTopic
    check_rejects("-1999", "empty topic")
    check_rejects(f"-1999.{UUID}-delete", "uniqueId-delete")
    # testParseTopicPartitionNameForMissingPartition
    check_rejects("test_topic-", "partition '' is not a non-negative integer")
    check_rejects("test_topic-.-delete", "uniqueId-delete")
    # testParseTopicPartitionNameForInvalidPartition
    check_rejects("test_topic-1999a", "partition '1999a' is not a non-negative integer")
    check_rejects("test_topic1999a.-delete", "uniqueId-delete")
    # testParseTopicPartitionNameForExistingInvalidDir
    check_rejects("non_kafka_dir", "no '-'")
    check_rejects("non_kafka_dir-delete", "uniqueId-delete")
    check_rejects("pet-x", "partition 'x' is not a non-negative integer")
    check_rejects("pet-1.5", "partition '1.5'")
    check_rejects("pet-+1", "partition '\\+1'")
    check_rejects("pet- 1", "partition ' 1'")
    check_rejects("pet-1_0", "partition '1_0'")
    check_rejects("pet-2147483648", "does not fit in a 32-bit integer")
    check_rejects("bad topic-1", "contains a character")
    check_rejects("..-1", "not allowed")
    check_rejects("x" * 250 + "-1", "maximum is 249")
    check_rejects("pet-1-delete", "uniqueId-delete")
    check_rejects("pet-1.-future", "uniqueId-future")


def test_dir_name_round_trips() -> None:
    for tp in [TopicPartition("pet", 0), TopicPartition("a-b-c", 9), TopicPartition("t-", 1)]:
        assert TopicPartition.parse_dir_name(tp.dir_name()) == tp
    assert TopicPartition("my-topic", 3).dir_name() == "my-topic-3"
    assert str(TopicPartition("pet", 4)) == "pet-4"


def test_ordering_and_hashing() -> None:
    unordered = [TopicPartition("b", 0), TopicPartition("a", 10), TopicPartition("a", 2)]
    assert sorted(unordered) == [
        TopicPartition("a", 2),
        TopicPartition("a", 10),
        TopicPartition("b", 0),
    ]
    assert {TopicPartition("a", 1): 1}[TopicPartition("a", 1)] == 1


def test_deleted_and_future_dirs() -> None:  # testLogDeleteDirName
    tp = TopicPartition("my-topic", 3)
    name = delete_dir_name(tp, UUID)
    assert name == f"my-topic-3.{UUID}-delete"
    assert is_deleted_dir(name)
    assert not is_future_dir(name)
    assert is_future_dir(f"my-topic-3.{UUID}-future")
    assert not is_deleted_dir("my-topic-3")
    assert not is_deleted_dir("my-topic-3-delete")  # no uniqueId: not Kafka's pattern
    with pytest.raises(ValueError, match="alphanumeric"):
        delete_dir_name(tp, "has-dash")


def test_validate_topic_name() -> None:
    validate_topic_name("ok.name_with-dashes")
    for bad in ["", ".", "..", "sp ace", "ü", "x" * 250]:
        with pytest.raises(ValueError):
            validate_topic_name(bad)
